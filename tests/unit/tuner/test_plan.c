/* `nccl-rail plan` (tools/plan/cmd_plan.c): what it prints, its options and
 * errors, its JSON (docs/json.md), and the flags that say what a site
 * knows. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/model.h"

static char out[1 << 21], out2[1 << 21];

#define NEED_PLAN(rc)                                                                              \
  do {                                                                                             \
    if ((rc) == -ENOENT) TEST_SKIP("nccl-rail not built (RAIL_BUILD_DIR)");                        \
  } while (0)

/* The CLI prints the model's choices: JSON carries every candidate, and
 * the chosen one is the model's for the same shape. */
void plan_cli_explains_the_choices(void) {
  struct rail_tuner_shape s = tt_shape(2, 8, 2, 200);
  struct rail_tuner_choice c;
  char want[160];
  int rc = tt_run_plan("--nodes 2 --gpus-per-node 8 --nics 2 --nic-gbps 200 --nvlink "
                       "--collective allreduce --json",
                       out, sizeof(out));

  NEED_PLAN(rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(strstr(out, "\"ranks\": 16") != NULL);
  CHECK(strstr(out, "\"candidates\"") != NULL);
  /* Rails given on the command line are InfiniBand-class RDMA. */
  s.fabric = RAIL_TUNER_FABRIC_IB;
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, 8, 1, NULL, 0, &c), 0);
  snprintf(want, sizeof(want),
           "{\"bytes\": 8, \"algo\": \"%s\", \"proto\": \"%s\", \"reason\": \"%s\"",
           rail_tuner_algo_name(c.algo), rail_tuner_proto_name(c.proto),
           rail_tuner_reason_name(c.reason));
  CHECK(strstr(out, want) != NULL);
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << 32, 1, NULL, 0, &c), 0);
  snprintf(want, sizeof(want), "{\"bytes\": 4294967296, \"algo\": \"%s\", \"proto\": \"%s\"",
           rail_tuner_algo_name(c.algo), rail_tuner_proto_name(c.proto));
  CHECK(strstr(out, want) != NULL);

  rc = tt_run_plan("--nodes 4 --gpus-per-node 1 --nics 0", out, sizeof(out));
  CHECK_EQ_INT(rc, 0);
  CHECK(strstr(out, "allreduce:") != NULL && strstr(out, "broadcast:") != NULL);
  CHECK(strstr(out, "pat/simple") != NULL);
  /* The reason column says which case each row is (tuner/evidence.h). */
  CHECK(strstr(out, "NCCL's choice") != NULL);
  CHECK(strstr(out, "nccl alone") != NULL);
  CHECK(strstr(out, "4 GiB") != NULL);
}

/* getopt_long: --opt=value and --opt value alike; a bad number names the
 * option; unknown options and stray arguments are usage errors (2); an
 * unreadable input file is 1; --help is 0. */
void plan_cli_options_and_errors(void) {
  int rc =
      tt_run_plan("--nodes=4 --gpus-per-node=8 --nics=4 --nic-gbps=100 --json", out, sizeof(out));
  NEED_PLAN(rc);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(
      tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 4 --nic-gbps 100 --json", out2, sizeof(out2)),
      0);
  CHECK(strcmp(out, out2) == 0);

  CHECK_EQ_INT(tt_run_plan("--nodes zero", out, sizeof(out)), 2);
  CHECK(strstr(out, "--nodes 'zero'") != NULL && strstr(out, "whole number") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nic-gbps=-5", out, sizeof(out)), 2);
  CHECK(strstr(out, "--nic-gbps '-5'") != NULL);
  CHECK_EQ_INT(tt_run_plan("--fabric warp", out, sizeof(out)), 2);
  CHECK(strstr(out, "--fabric 'warp'") != NULL);
  CHECK_EQ_INT(tt_run_plan("--gpu z80", out, sizeof(out)), 2);
  CHECK(strstr(out, "--gpu 'z80'") != NULL);
  CHECK_EQ_INT(tt_run_plan("--collective allsum", out, sizeof(out)), 2);
  CHECK_EQ_INT(tt_run_plan("--frobnicate", out, sizeof(out)), 2);
  CHECK(strstr(out, "unknown option '--frobnicate'") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes", out, sizeof(out)), 2);
  CHECK(strstr(out, "incomplete option") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes 2 stray", out, sizeof(out)), 2);
  CHECK_EQ_INT(tt_run_plan("--input /nonexistent/topo.xml --nodes 2", out, sizeof(out)), 1);
  CHECK_EQ_INT(tt_run_plan("--help", out, sizeof(out)), 0);
  CHECK(strstr(out, "--collective") != NULL && strstr(out, "--fabric") != NULL &&
        strstr(out, "--sharp") != NULL && strstr(out, "--gpu") != NULL);
}

/* The JSON is an interface: "schema": 1, every field name plan has always
 * printed, and the new ones (docs/json.md). */
void plan_cli_json_schema_and_fields(void) {
  static const char *const fields[] = {"\"schema\": 1",
                                       "\"shape\": {",
                                       "\"nodes\": 4",
                                       "\"gpus_per_node\": 8",
                                       "\"ranks\": 32",
                                       "\"rails\": 8",
                                       "\"rail_gbps\": 400",
                                       "\"intra\": \"nvlink\"",
                                       "\"nvls\": true",
                                       "\"nvswitch\": true",
                                       "\"socket\": false",
                                       "\"net_latency_us\": 0",
                                       "\"total_gbps\": 3200",
                                       "\"fabric\": \"ib\"",
                                       "\"sm\": 90",
                                       "\"nvlinks\": 0",
                                       "\"sharp\": false",
                                       "\"mnnvl\": false",
                                       "\"tuner_active\": true",
                                       "\"rules\": null",
                                       "\"runtime_fabric\"",
                                       "\"collectives\": [",
                                       "\"name\": \"allreduce\"",
                                       "\"sizes\": [",
                                       "\"time_us\": ",
                                       "\"busbw_gbs\": ",
                                       "\"nccl_algo\": ",
                                       "\"nccl_proto\": ",
                                       "\"candidates\": [",
                                       "\"latency_us\": ",
                                       "\"algbw_gbs\": "};
  int rc = tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 400 --nvlink --gpu h100 "
                       "--fabric ib --json",
                       out, sizeof(out));
  NEED_PLAN(rc);
  CHECK_EQ_INT(rc, 0);
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
    if (strstr(out, fields[i]) == NULL) {
      fprintf(stderr, "  missing %s\n", fields[i]);
      CHECK(0);
    }
}

/* What a site knows, on the command line: SHARP shows CollNet and its
 * choice, the fabric and the GPU generation change the model, and a fabric
 * the plugin cannot see comes with the line that tells it. */
void plan_cli_site_knowledge_flags(void) {
  int rc = tt_run_plan("--nodes 16 --gpus-per-node 8 --nics 8 --nic-gbps 400 --fabric ib --sharp "
                       "--nvlink --gpu h100 --collective allreduce --json",
                       out, sizeof(out));
  NEED_PLAN(rc);
  CHECK_EQ_INT(rc, 0);
  CHECK(strstr(out, "\"sharp\": true") != NULL);
  CHECK(strstr(out, "{\"algo\": \"collnet_direct\", \"proto\": \"simple\"") != NULL);
  /* On Hopper NVLS runs over CollNet across nodes: a candidate, but no
   * measured decision supports the in-network corrections, so the choice
   * at 4 GiB is NCCL's own, and says so. */
  CHECK(strstr(out, "{\"algo\": \"nvls\", \"proto\": \"simple\"") != NULL);
  CHECK(strstr(out, "\"case\": \"nccl") != NULL);
  CHECK(strstr(out, "\"case\": \"correction\"") == NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes 16 --gpus-per-node 8 --nics 8 --nic-gbps 400 --fabric ib "
                           "--nvlink --gpu h100 --collective allreduce --json",
                           out2, sizeof(out2)),
               0);
  CHECK(strstr(out2, "collnet") == NULL);

  /* Sockets need no line: NCCL's table shows them (no LL128 across nodes). */
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 400 --fabric tcp "
                           "--collective allgather",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "sockets") != NULL || strstr(out, "tcp") != NULL);
  CHECK(strstr(out, "note:") == NULL && strstr(out, "fabric tcp") == NULL);
  CHECK(strstr(out, "ring/ll128") == NULL); /* no LL128 over sockets */
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 400 --fabric tcp "
                           "--collective allgather --json",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "\"runtime_fabric\": \"tcp\"") != NULL);
  CHECK(strstr(out, "\"fabric_note\": null") != NULL);
  /* RoCE does need it (the line that tells the plugin), and so does RDMA
   * between PCIe GPUs, whose table reads as sockets. */
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 400 --fabric roce "
                           "--nvlink --collective allgather",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "\"fabric roce\"") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 400 --fabric ib "
                           "--pcie --collective allgather",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "\"fabric ib\"") != NULL && strstr(out, "takes for sockets") != NULL);

  CHECK_EQ_INT(tt_run_plan("--gpus-per-node 8 --nvlink --gpu b200 --collective allreduce --json",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "\"sm\": 100") != NULL);
  CHECK_EQ_INT(tt_run_plan("--gpus-per-node 8 --nvlink --gpu h800 --collective allreduce --json",
                           out2, sizeof(out2)),
               0);
  CHECK(strstr(out2, "\"sm\": 90") != NULL && strstr(out2, "\"nvlinks\": 8") != NULL);
  CHECK(strcmp(out, out2) != 0);

  /* An A100 HGX has NVSwitches and no NVLink SHARP: no NVLS candidate, and
   * with SHARP CollNetDirect is one (the option order does not matter). */
  CHECK_EQ_INT(tt_run_plan("--gpu a100 --nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 200 "
                           "--fabric ib --sharp --nvlink --collective allreduce --json",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "\"nvls\": false") != NULL && strstr(out, "\"nvswitch\": true") != NULL);
  CHECK(strstr(out, "nvls_tree") == NULL && strstr(out, "\"algo\": \"nvls\"") == NULL);
  CHECK(strstr(out, "{\"algo\": \"collnet_direct\", \"proto\": \"simple\"") != NULL);
  CHECK(strstr(out, "{\"bytes\": 4294967296, \"algo\": \"collnet_") != NULL);
}

/* What plan takes rather than knows is said: NICs without a speed, NVLink
 * from a GPU sold only on NVSwitch boards, and whose model "NCCL alone" is
 * (--nccl, --cpu). */
void plan_cli_says_what_it_assumes(void) {
  char fixture[512];
  int rc = tt_run_plan("--nodes 2 --gpus-per-node 8 --nics 8 --nic-gbps 400 --gpu b200 "
                       "--collective allreduce --json",
                       out, sizeof(out));

  NEED_PLAN(rc);
  CHECK_EQ_INT(rc, 0);
  /* A B200 is an HGX B200: NVLink, NVSwitch, NVLS, and said. */
  CHECK(strstr(out, "\"intra\": \"nvlink\"") != NULL);
  CHECK(strstr(out, "sold only on NVSwitch boards") != NULL);
  CHECK(strstr(out, "\"nccl_release\": \"2.30.7\"") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes 2 --gpus-per-node 8 --nics 8 --nic-gbps 400 --gpu b200 "
                           "--pcie --collective allreduce --json",
                           out2, sizeof(out2)),
               0);
  CHECK(strstr(out2, "\"intra\": \"pcie\"") != NULL);
  CHECK(strstr(out2, "sold only on NVSwitch boards") == NULL);
  /* Another release's model, another CPU. */
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --gpus-per-node 8 --nics 8 --nic-gbps 400 --gpu h100 "
                           "--nccl 2.23 --cpu amd --collective allreduce",
                           out, sizeof(out)),
               0);
  CHECK(strstr(out, "NCCL 2.23.4's model") != NULL && strstr(out, "AMD hosts") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --nccl 3.1", out, sizeof(out)), 2);
  CHECK(strstr(out, "--nccl '3.1'") != NULL);
  CHECK_EQ_INT(tt_run_plan("--nodes 4 --cpu arm", out, sizeof(out)), 2);
  /* NICs that report no speed are planned at NCCL's socket default, and
   * the plan says so; given a speed, it does not. */
  tt_source_path("tests/fixtures/topo/crafted-bond-nics-no-attributes.xml", fixture,
                 sizeof(fixture));
  snprintf(out2, sizeof(out2), "--input %s --nodes 2 --collective allreduce", fixture);
  CHECK_EQ_INT(tt_run_plan(out2, out, sizeof(out)), 0);
  CHECK(strstr(out, "assumed: 10 Gbit/s a rail") != NULL);
  snprintf(out2, sizeof(out2), "--input %s --nodes 2 --nic-gbps 100 --collective allreduce",
           fixture);
  CHECK_EQ_INT(tt_run_plan(out2, out, sizeof(out)), 0);
  CHECK(strstr(out, "assumed: 10 Gbit/s a rail") == NULL);
}
