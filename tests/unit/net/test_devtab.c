/* unit.net_devtab: the process device table under concurrent use. NCCL
 * reads device properties on one thread while another makes virtual
 * devices, and a v11 communicator may finalize while another thread still
 * asks about devices. Neither may ever see a half-made device or freed
 * memory. A process of its own: it starts and ends the table many times. */
#include <pthread.h>

#include "net_util.h"
#include "test.h"

struct nt_reader {
  int stop;  /* atomic */
  long seen; /* atomic: devices whose properties were read */
  int bad;   /* properties read without a name or ptrSupport */
};

static void *nt_reader_main(void *arg) {
  struct nt_reader *r = arg;

  while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
    struct rail_net_props props;
    int n = 0;
    rail_net_devices(&n);
    if (n > 0 && rail_net_get_props(n - 1, &props) == 0) {
      __atomic_add_fetch(&r->seen, 1, __ATOMIC_RELEASE);
      if (props.name == NULL || props.ptr_support == 0) r->bad++;
    }
  }
  return NULL;
}

/* Devices appended while a reader reads the newest one: every device it can
 * see is whole (its transport chosen before it is published). */
TEST(test_add_while_reading) {
  struct nt_reader r = {0};
  pthread_t th;

  nt_log_start();
  for (int round = 0; round < 40; round++) {
    CHECK_EQ_INT(rail_net_init(), 0);
    __atomic_store_n(&r.stop, 0, __ATOMIC_RELEASE);
    CHECK_EQ_INT(pthread_create(&th, NULL, nt_reader_main, &r), 0);
    long before = __atomic_load_n(&r.seen, __ATOMIC_ACQUIRE);
    for (int i = 0; i < 48; i++)
      if (nt_lo_device(1 + i % 2, NULL) < 0) break;
    /* On a loaded machine the reader may not have run yet: let it read at
     * least once a round (bounded), so that every round checks something. */
    for (int w = 0; w < 2000 && __atomic_load_n(&r.seen, __ATOMIC_ACQUIRE) == before; w++)
      usleep(1000);
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    rail_net_fini();
  }
  CHECK(__atomic_load_n(&r.seen, __ATOMIC_ACQUIRE) >= 40);
  CHECK_EQ_INT(r.bad, 0);
}

/* The last fini while another thread reads properties: the reader gets a
 * device or an error, never freed memory. */
TEST(test_fini_while_reading) {
  struct nt_reader r = {0};
  pthread_t th;

  nt_log_start();
  CHECK_EQ_INT(pthread_create(&th, NULL, nt_reader_main, &r), 0);
  for (int round = 0; round < 300; round++) {
    CHECK_EQ_INT(rail_net_init(), 0);
    CHECK(nt_lo_device(2, NULL) >= 0);
    usleep(200);
    rail_net_fini();
  }
  __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  CHECK_EQ_INT(r.bad, 0);
}

RAIL_TEST_MAIN(test_add_while_reading, test_fini_while_reading)
