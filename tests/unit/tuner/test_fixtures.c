/* unit.tuner_fixtures: the tuner on real and crafted machines, each in a
 * fresh process that reads its machine from NCCL_RAIL_TOPO_FILE as the
 * plugin does inside NCCL. This binary's own process never builds the
 * machine model (rail_topo_get() is built once per process), so every
 * forked child reads its own file. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/param.h"
#include "plugin/abi/nccl_tuner.h"
#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/shape.h"
#include "tuner/tuner.h"

extern const ncclTuner_v5_t ncclTunerPlugin_v5;

/* Runs fn(arg) in a forked child with NCCL_RAIL_TOPO_FILE=file (and
 * transport, if not NULL) and returns what it wrote, up to len bytes. */
static int in_child(const char *file, const char *transport, void (*fn)(int fd, const void *arg),
                    const void *arg, char *buf, size_t len) {
  int fds[2], status;
  size_t got = 0;
  ssize_t n;
  pid_t pid;

  if (pipe(fds) != 0) return -errno;
  pid = fork();
  if (pid < 0) return -errno;
  if (pid == 0) {
    close(fds[0]);
    setenv("NCCL_RAIL_TOPO_FILE", file, 1);
    if (transport) setenv("NCCL_RAIL_TRANSPORT", transport, 1);
    rail_param_reload();
    fn(fds[1], arg);
    _exit(0);
  }
  close(fds[1]);
  while (got + 1 < len && (n = read(fds[0], buf + got, len - 1 - got)) > 0)
    got += (size_t)n;
  buf[got] = '\0';
  close(fds[0]);
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void put(int fd, const char *s) {
  if (write(fd, s, strlen(s)) < 0) _exit(1);
}

/* ---- plan --input F and the run-time path ------------------------------- */

/* The shape fields both paths must agree on, as one line. */
static void shape_line(const struct rail_tuner_shape *s, char *buf, size_t len) {
  snprintf(buf, len,
           "rails=%d rail_gbps=%g socket=%d fabric=%s intra=%s nvls=%d sm=%d nvlinks=%d mnnvl=%d",
           s->rails, s->rail_gbps, s->socket, rail_tuner_fabric_name(s->fabric),
           s->intra == RAIL_TUNER_INTRA_NVLINK ? "nvlink" : "pcie", s->nvls, s->sm, s->nvlinks,
           s->mnnvl);
}

/* The run-time path, in the child: the tuner's own environment reading,
 * for 16 nodes of the machine's GPUs. */
static void runtime_shape_child(int fd, const void *arg) {
  struct rail_tuner_env env;
  struct rail_tuner_shape s;
  char line[256] = "no shape";

  (void)arg;
  rail_tuner_env_read(&env);
  int g = env.topo->ngpus > 0 ? env.topo->ngpus : 1;
  /* A file the loader rejects: the plugin says so and discovers live. */
  if (strcmp(env.topo->source, getenv("NCCL_RAIL_TOPO_FILE")) != 0)
    snprintf(line, sizeof(line), "unusable");
  else if (rail_tuner_shape_from_topo(env.topo, env.transport, (size_t)16 * g, 16, &s) == 0)
    shape_line(&s, line, sizeof(line));
  put(fd, line);
}

static int runtime_shape(const char *file, char *buf, size_t len) {
  return in_child(file, NULL, runtime_shape_child, NULL, buf, len);
}

/* The same fields from `nccl-rail plan --input F --json`. */
static int plan_shape_line(const char *file, char *buf, size_t len) {
  static char out[1 << 21];
  char args[1200];
  struct rail_tuner_shape s = {0};
  char fabric[32] = "", intra[16] = "", socket[8] = "", nvls[8] = "", mnnvl[8] = "";
  const char *p;
  int rc;

  snprintf(args, sizeof(args), "--input '%s' --nodes 16 --collective broadcast --json", file);
  rc = tt_run_plan(args, out, sizeof(out));
  if (rc == 1 && strstr(out, "no topology from") != NULL) {
    /* plan names the file it cannot use and stops. */
    snprintf(buf, len, "unusable");
    return 0;
  }
  if (rc != 0) return rc < 0 ? rc : -EINVAL;
  p = strstr(out, "\"shape\": ");
  if (p == NULL ||
      sscanf(p,
             "\"shape\": {\"nodes\": %*d, \"gpus_per_node\": %*d, \"ranks\": %*d, \"rails\": %d, "
             "\"rail_gbps\": %lf, \"intra\": \"%15[a-z]\", \"nvls\": %7[a-z], \"socket\": %7[a-z], "
             "\"net_latency_us\": %*f, \"total_gbps\": %*f, \"fabric\": \"%31[a-z]\", \"sm\": %d, "
             "\"nvlinks\": %d, \"sharp\": %*[a-z], \"mnnvl\": %7[a-z]",
             &s.rails, &s.rail_gbps, intra, nvls, socket, fabric, &s.sm, &s.nvlinks, mnnvl) != 9)
    return -EINVAL;
  s.intra = strcmp(intra, "nvlink") == 0 ? RAIL_TUNER_INTRA_NVLINK : RAIL_TUNER_INTRA_PCIE;
  s.nvls = strcmp(nvls, "true") == 0;
  s.socket = strcmp(socket, "true") == 0;
  s.mnnvl = strcmp(mnnvl, "true") == 0;
  s.fabric = rail_tuner_fabric_parse(fabric);
  shape_line(&s, buf, len);
  return 0;
}

static int check_fixture_dir(const char *rel) {
  char dir[512], file[1024], a[256], b[256];
  struct dirent *e;
  DIR *d = opendir(tt_source_path(rel, dir, sizeof(dir)));
  int n = 0;

  CHECK(d != NULL);
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml") != 0) continue;
    snprintf(file, sizeof(file), "%s/%s", dir, e->d_name);
    a[0] = b[0] = '\0';
    CHECK_EQ_INT(runtime_shape(file, a, sizeof(a)), 0);
    CHECK_EQ_INT(plan_shape_line(file, b, sizeof(b)), 0);
    if (strcmp(a, b) != 0) {
      fprintf(stderr, "  %s:\n    run time: %s\n    plan:     %s\n", e->d_name, a, b);
      CHECK(0);
    }
    n++;
  }
  closedir(d);
  return n;
}

/* `nccl-rail plan --input F` and the plugin on that machine
 * (NCCL_RAIL_TOPO_FILE=F) start from the same shape, on every fixture. */
void plan_input_and_runtime_start_from_one_shape(void) {
  char probe[64];
  int n;

  if (tt_run_plan("--help", probe, sizeof(probe)) == -ENOENT)
    TEST_SKIP("nccl-rail not built (RAIL_BUILD_DIR)");
  n = check_fixture_dir("tests/fixtures/topo");
  n += check_fixture_dir("tests/fixtures/topo-real");
  CHECK(n >= 20);
}

/* ---- unlike machines, one choice ---------------------------------------- */

/* The job every child joins: 4 nodes of 8, and the tables NCCL would hand
 * over for it (the same on every rank: NCCL builds them from agreed graphs). */
#define JOB_NODES 4
#define JOB_GPUS 8

/* In the child: NCCL's v5 table driven for every collective and size, on
 * two jobs: 8 x 400G RDMA, and 1 x 100G over sockets (NCCL's table has no
 * LL128 across nodes there, which the tuner reads as sockets with no file);
 * writes a line of chosen entries (index of the 0, or '-') for each. */
static void choices_child(int fd, const void *arg) {
  ncclNvlDomainInfo_v5_t nvl = {
      .nNvlDomains = JOB_NODES, .minRanksPerNvlDomain = JOB_GPUS, .maxRanksPerNvlDomain = JOB_GPUS};
  struct rail_tuner_shape jobs[2] = {tt_shape(JOB_NODES, JOB_GPUS, 8, 400),
                                     tt_shape(JOB_NODES, JOB_GPUS, 1, 100)};
  char line[8192];
  size_t off = 0;
  void *ctx = NULL;

  (void)arg;
  jobs[1].socket = 1;
  jobs[1].fabric = RAIL_TUNER_FABRIC_TCP;
  if (ncclTunerPlugin_v5.init(&ctx, 1, JOB_NODES * JOB_GPUS, JOB_NODES, NULL, &nvl, NULL) !=
      ncclSuccess)
    _exit(1);
  for (int j = 0; j < 2; j++)
    for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
      for (int l = 3; l <= 34; l++) {
        float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
        int nch = 0, a = -1, p = -1;
        tt_nccl_table(&jobs[j], coll, (size_t)1 << l, 1, t);
        ncclTunerPlugin_v5.getCollInfo(ctx, coll, (size_t)1 << l, 1, (float **)t, 7, 3, 0, &nch);
        if (tt_count_zero(t, &a, &p) == 1)
          off += (size_t)snprintf(line + off, sizeof(line) - off, "%d", a * RAIL_PROTO_COUNT + p);
        else
          off += (size_t)snprintf(line + off, sizeof(line) - off, "-");
        off += (size_t)snprintf(line + off, sizeof(line) - off, l == 34 ? "\n" : " ");
      }
  ncclTunerPlugin_v5.finalize(ctx);
  put(fd, line);
}

/* Processes whose machines differ (an 8 x 400G RoCE box, a PCIe one, a VM
 * with virtual NICs, mixed NIC speeds, sockets forced) get the same tables
 * from NCCL and make the same choice for every collective and size, on an
 * RDMA job and on a job over sockets. */
void abi_unlike_machines_choose_alike(void) {
  static const struct {
    const char *file, *transport;
  } machines[] = {
      {"tests/fixtures/topo/nccl-azure-ndv5.xml", NULL},
      {"tests/fixtures/topo/nccl-aws-p5.xml", NULL},
      {"tests/fixtures/topo/crafted-pcie-no-switch.xml", NULL},
      {"tests/fixtures/topo/crafted-mixed-speed.xml", NULL},
      {"tests/fixtures/topo/crafted-vm-virtual-nics.xml", NULL},
      {"tests/fixtures/topo-real/nccl-ibmcloud-gx3d-h100-vsi.xml", "socket"},
  };
  static char first[16384], got[16384];
  char path[512];

  for (size_t m = 0; m < sizeof(machines) / sizeof(machines[0]); m++) {
    char *buf = m == 0 ? first : got;
    tt_source_path(machines[m].file, path, sizeof(path));
    CHECK_EQ_INT(in_child(path, machines[m].transport, choices_child, NULL, buf, sizeof(first)), 0);
    CHECK(strlen(buf) > 2 * 5 * 32);
    if (m > 0 && strcmp(first, got) != 0) {
      fprintf(stderr, "  %s chose otherwise:\n    %s    %s", machines[m].file, first, got);
      CHECK(0);
    }
  }
  /* Some choice was made. */
  CHECK(strchr(first, '-') == NULL || strspn(first, "- \n") < strlen(first));
}

RAIL_TEST_MAIN(plan_input_and_runtime_start_from_one_shape, abi_unlike_machines_choose_alike)
