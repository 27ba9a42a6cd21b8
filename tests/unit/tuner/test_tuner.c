/* unit.tuner: the cost model and NCCL's own (test_model.c, test_nccl.c),
 * shapes (test_shape.c), the site rules (test_rules.c), the decision on
 * NCCL's table (test_table.c), the ABI tables (test_abi.c) and `nccl-rail
 * plan` (test_plan.c). The measurements are unit.tuner_data's; the real
 * machines, each in its own process, unit.tuner_fixtures'. */
#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"

RAIL_TEST_MAIN(ring_latency_linear_in_ranks, tree_latency_logarithmic_in_nodes,
               ring_bandwidth_tends_to_link_rate, protocols_trade_latency_for_bandwidth,
               two_node_tree_halves_network_bytes, candidates_follow_nccl_rules,
               bad_shapes_are_refused, pipe_ops_count_as_nccl_counts_them,
               decide_picks_the_cheapest_candidate, decide_skips_unavailable_entries,
               nvlink_speed_follows_the_gpu_generation, fabric_sets_hop_cost_and_efficiencies,
               collnet_wins_where_sharp_halves_the_traffic, nvls_across_nodes_needs_sharp,
               mnnvl_leaves_every_choice_to_nccl, outside_evidence_the_choice_is_nccls,
               inside_evidence_the_correction_stands, contradicted_correction_does_not_apply,
               b200_sharp_two_nodes_keeps_nvls_tree, golden_1x8_nvlink, golden_2x8_dual_rail_2x200g,
               golden_16x8_8x400g, golden_4x1_sockets, nccl_model_reproduces_published_latencies,
               nccl_table_follows_enable_rules, nccl_invert_recovers_bandwidth,
               observed_cost_equals_model_on_its_own_table, shape_from_machine_model,
               shape_rails_are_compute_nics_only, shape_fabric_and_gpu_from_model,
               shape_from_table_reads_nccl_bandwidths, shape_from_table_reads_enable_pattern,
               shape_from_table_reads_nccl_latency, rules_parse_and_match,
               rules_bad_lines_reported_and_skipped, rules_fabric_line_and_hash,
               rules_star_forces_one_part, rules_restrict_keeps_nccl_costs,
               rules_site_file_where_no_variable, rules_shape_line_fits_the_job,
               table_minus_one_entries_untouched, table_same_inputs_same_choice,
               table_untouched_outside_the_contract, table_site_rules_apply,
               table_site_rule_of_one_part, table_rule_channels_only_lower,
               table_all_minus_one_and_no_pipe_ops, table_never_negative_for_nccl_2_31,
               table_random_shapes_and_patterns, table_local_machine_never_decides,
               abi_tables_are_named_rail_and_complete, abi_v5_chooses_and_leaves_constants,
               abi_v5_zeroed_constants_change_nothing, abi_v5_leaves_multi_node_nvlink_alone,
               abi_nccl_algo_set_leaves_table_untouched,
               abi_nccl_rail_tuner_0_leaves_table_untouched, abi_v2_leaves_nccl_choice,
               abi_each_table_models_its_release, abi_rules_file_from_environment,
               abi_rules_from_the_site_file, abi_fingerprint_mismatch_changes_no_decision,
               plan_cli_explains_the_choices, plan_cli_options_and_errors,
               plan_cli_json_schema_and_fields, plan_cli_site_knowledge_flags,
               plan_cli_says_what_it_assumes, ll_ceiling_by_generation_and_scale,
               table_sockets_need_no_file, shape_from_table_sockets_from_ll128,
               tree_fill_per_network_level, nvlstree_levels_pay_the_reported_latency_on_efa)
