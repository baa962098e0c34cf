/* catena starts once per process, on one thread: catena_init on a second
 * thread, and again after catena_finalize, give CATENA_ERR_STATE (under
 * mpiexec, where catena initialized and finalized MPI, too: no exit inside
 * MPI). */
#include <pthread.h>

#include "check.h"

struct attempt {
    int init, world;
};

static void *from_another_thread(void *arg) {
    struct attempt *a = arg;
    catena_comm_t *world;
    a->init = catena_init();
    a->world = catena_comm_world(&world);
    return NULL;
}

int main(void) {
    catena_comm_t *world;
    int n;
    OK(catena_init());
    OK(catena_comm_world(&world));
    OK(catena_comm_rank(world, &me));
    OK(catena_comm_size(world, &n));

    struct attempt a = {-1, -1};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, from_another_thread, &a) == 0, "pthread_create");
    CHECK(pthread_join(thread, NULL) == 0, "pthread_join");
    CHECK(a.init == CATENA_ERR_STATE, "catena_init on a second thread gave %d", a.init);
    CHECK(a.world == CATENA_ERR_STATE, "a call on a second thread gave %d", a.world);
    /* This thread's instance is untouched. */
    OK(catena_barrier(world));

    OK(catena_finalize());
    FAILS(catena_init(), CATENA_ERR_STATE);
    FAILS(catena_comm_world(&world), CATENA_ERR_STATE);
    if (me == 0)
        printf("init_once: %d checks passed on each of %d processes\n", checks, n);
    return 0;
}
