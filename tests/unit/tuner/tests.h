/* What the files of unit.tuner and unit.tuner_data share: the helpers in
 * helpers.c and every test function, run by the RAIL_TEST_MAIN of
 * test_tuner.c (unit.tuner) and test_data.c (unit.tuner_data). */
#ifndef RAIL_TEST_TUNER_TESTS_H
#define RAIL_TEST_TUNER_TESTS_H

#include <stddef.h>

#include "topology/topo.h"
#include "tuner/model.h"

/* ---- helpers.c ---------------------------------------------------------- */

/* nodes x gpus on NVLink + NVSwitch, rails x gbps of an unnamed RDMA fabric. */
struct rail_tuner_shape tt_shape(int nodes, int gpus, int rails, double gbps);
/* The model's time, with a CHECK that it has the entry. */
double tt_cost(const struct rail_tuner_shape *s, int coll, int algo, int proto, size_t bytes,
               struct rail_tuner_cost *out);
/* The table NCCL's model (tuner/nccl_model.h) builds for a shape. */
void tt_nccl_table(const struct rail_tuner_shape *s, int coll, size_t bytes, int pipe_ops,
                   float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]);
/* A table as NCCL might pass it: every entry a positive time, some -1. */
void tt_fill_table(float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], unsigned seed);
/* Entries at exactly 0; the last one in *algo, *proto. */
int tt_count_zero(float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], int *algo, int *proto);

/* Log capture: counts lines containing a needle among the last eight. */
extern int tt_nlogged, tt_nwarned;
void tt_capture_start(void);
void tt_capture_stop(void);
int tt_count_logged(const char *needle);
/* Records one formatted line, as a WARN if warn (for loggers of other
 * signatures, such as NCCL's). */
void tt_capture_record(int warn, const char *msg);

void tt_unset_tuner_env(void);
/* A temporary file holding text; a static path, NULL on failure. */
char *tt_write_temp(const char *text);
/* A machine model: ngpus GPUs on NVLink + 4 NVSwitches, ngroups rail groups of
 * nics_per_group NICs at mbps each, RDMA devices if rdma. calloc'ed. */
struct rail_topo *tt_topo_with(int ngpus, int ngroups, int nics_per_group, int mbps, int rdma);
/* A context of nodes x gpus on an 8x400G RDMA machine, rules_path or none. */
struct rail_tuner_ctx *tt_make_ctx(int nodes, int gpus, const char *rules_path);
/* Runs `nccl-rail plan ARGS` (stderr too) into out; its exit status, or
 * -ENOENT when the binary is not built (RAIL_BUILD_DIR). */
int tt_run_plan(const char *args, char *out, size_t len);
/* A path under the source tree (RAIL_SOURCE_DIR, else this file's). */
const char *tt_source_path(const char *rel, char *buf, size_t len);

/* ---- unit.tuner --------------------------------------------------------- */

/* test_model.c */
void ring_latency_linear_in_ranks(void);
void tree_latency_logarithmic_in_nodes(void);
void ring_bandwidth_tends_to_link_rate(void);
void protocols_trade_latency_for_bandwidth(void);
void two_node_tree_halves_network_bytes(void);
void candidates_follow_nccl_rules(void);
void bad_shapes_are_refused(void);
void pipe_ops_count_as_nccl_counts_them(void);
void decide_picks_the_cheapest_candidate(void);
void decide_skips_unavailable_entries(void);
void nvlink_speed_follows_the_gpu_generation(void);
void fabric_sets_hop_cost_and_efficiencies(void);
void ll_ceiling_by_generation_and_scale(void);
void tree_fill_per_network_level(void);
void nvlstree_levels_pay_the_reported_latency_on_efa(void);
void collnet_wins_where_sharp_halves_the_traffic(void);
void nvls_across_nodes_needs_sharp(void);
void mnnvl_leaves_every_choice_to_nccl(void);

/* test_decide.c */
void outside_evidence_the_choice_is_nccls(void);
void inside_evidence_the_correction_stands(void);
void contradicted_correction_does_not_apply(void);
void b200_sharp_two_nodes_keeps_nvls_tree(void);
void golden_1x8_nvlink(void);
void golden_2x8_dual_rail_2x200g(void);
void golden_16x8_8x400g(void);
void golden_4x1_sockets(void);

/* test_nccl.c */
void nccl_model_reproduces_published_latencies(void);
void nccl_table_follows_enable_rules(void);
void nccl_invert_recovers_bandwidth(void);
void observed_cost_equals_model_on_its_own_table(void);

/* test_shape.c */
void shape_from_machine_model(void);
void shape_rails_are_compute_nics_only(void);
void shape_fabric_and_gpu_from_model(void);
void shape_from_table_reads_nccl_bandwidths(void);
void shape_from_table_reads_enable_pattern(void);
void shape_from_table_reads_nccl_latency(void);
void shape_from_table_sockets_from_ll128(void);
void plan_input_and_runtime_start_from_one_shape(void); /* test_fixtures.c */

/* test_rules.c */
void rules_parse_and_match(void);
void rules_bad_lines_reported_and_skipped(void);
void rules_fabric_line_and_hash(void);
void rules_star_forces_one_part(void);
void rules_restrict_keeps_nccl_costs(void);
void rules_site_file_where_no_variable(void);
void rules_shape_line_fits_the_job(void);

/* test_table.c */
void table_minus_one_entries_untouched(void);
void table_same_inputs_same_choice(void);
void table_untouched_outside_the_contract(void);
void table_site_rules_apply(void);
void table_site_rule_of_one_part(void);
void table_rule_channels_only_lower(void);
void table_all_minus_one_and_no_pipe_ops(void);
void table_never_negative_for_nccl_2_31(void);
void table_random_shapes_and_patterns(void);
void table_local_machine_never_decides(void);
void table_sockets_need_no_file(void);

/* test_abi.c */
void abi_tables_are_named_rail_and_complete(void);
void abi_v5_chooses_and_leaves_constants(void);
void abi_v5_zeroed_constants_change_nothing(void);
void abi_v5_leaves_multi_node_nvlink_alone(void);
void abi_nccl_algo_set_leaves_table_untouched(void);
void abi_nccl_rail_tuner_0_leaves_table_untouched(void);
void abi_v2_leaves_nccl_choice(void);
void abi_each_table_models_its_release(void);
void abi_rules_file_from_environment(void);
void abi_rules_from_the_site_file(void);
void abi_unlike_machines_choose_alike(void);
void abi_fingerprint_mismatch_changes_no_decision(void);

/* test_plan.c */
void plan_cli_explains_the_choices(void);
void plan_cli_options_and_errors(void);
void plan_cli_json_schema_and_fields(void);
void plan_cli_site_knowledge_flags(void);
void plan_cli_says_what_it_assumes(void);

/* ---- unit.tuner_data ---------------------------------------------------- */

/* test_p5en.c */
void p5en_table_reads_as_published(void);
void p5en_choices_within_2x_of_measured_crossovers(void);
/* test_points.c */
void points_calibration_set(void);
void points_validation_set(void);
void points_vendor_tables(void);
void plan_validate_reports_every_set(void);
void every_set_at_or_ahead_of_nccl(void);
/* test_regions.c: the scored sets (tuner/score.h) and what both files check */
struct rail_score_row;
struct rail_score_source;
const struct rail_score_source *tt_score_source(const char *file);
void tt_print_row(const struct rail_score_row *r);
void tt_check_beside_nccl(const struct rail_score_row *r);
void regions_calibration_aws(void);
void regions_validation_aws(void);

#endif
