/* catena started on a communicator of a program that runs MPI
 * (catena_init_mpi): the even and the odd ranks of MPI_COMM_WORLD each
 * start their own catena job on their half, beside a collective the
 * program has in flight on it, and catena's results match MPI's on the
 * same communicator. */
#include <mpi.h>

#include "check.h"

int main(int argc, char **argv) {
    int wsize;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* Halves in reversed order: catena's ranks must be the half's. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);

    /* What catena cannot start on: nothing starts. */
    CHECK(catena_init_mpi(NULL) == CATENA_ERR_ARG, "NULL");
    MPI_Comm null = MPI_COMM_NULL;
    CHECK(catena_init_mpi(&null) == CATENA_ERR_UNAVAILABLE, "MPI_COMM_NULL");
    if (wsize >= 2) {
        /* Each half's leader (its highest world rank) meets the other's. */
        int last_even = (wsize - 1) - (wsize - 1) % 2;
        int last_odd = (wsize - 1) % 2 ? wsize - 1 : wsize - 2;
        MPI_Comm inter;
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, me % 2 ? last_even : last_odd, 7,
                             &inter);
        CHECK(catena_init_mpi(&inter) == CATENA_ERR_UNAVAILABLE, "an intercommunicator");
        MPI_Comm_free(&inter);
    }
    {
        /* A freed handle, with MPI told to return errors: an error, not a
         * start on a dead communicator. */
        MPI_Comm gone;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Comm_dup(MPI_COMM_SELF, &gone);
        MPI_Comm stale = gone;
        MPI_Comm_free(&gone);
        CHECK(catena_init_mpi(&stale) == CATENA_ERR_UNAVAILABLE, "a freed communicator");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    }
    int flag;
    OK(catena_initialized(&flag));
    CHECK(flag == 0, "started on what it refused");

    /* The program's own collective on `half` stays in flight meanwhile. */
    MPI_Request program;
    MPI_Ibarrier(half, &program);
    OK(catena_init_mpi(&half));
    CHECK(catena_init_mpi(&half) == CATENA_ERR_STATE, "started twice");
    catena_comm_t *world;
    int rank, size;
    OK(catena_comm_world(&world));
    OK(catena_comm_rank(world, &rank));
    OK(catena_comm_size(world, &size));
    CHECK(rank == hrank && size == hsize, "catena %d of %d, the half %d of %d", rank, size, hrank,
          hsize);

    long mine = me, sum = 0, mpi_sum = 0;
    OK(catena_allreduce(world, &mine, &sum, 1, CATENA_INT64, CATENA_SUM));
    MPI_Allreduce(&mine, &mpi_sum, 1, MPI_LONG, MPI_SUM, half);
    CHECK(sum == mpi_sum, "allreduce %ld, MPI %ld", sum, mpi_sum);

    /* A split of catena's world against MPI's of the half. */
    catena_comm_t *sub;
    MPI_Comm mpi_sub;
    OK(catena_comm_split(world, hrank % 3, me, &sub));
    MPI_Comm_split(half, hrank % 3, me, &mpi_sub);
    int srank, ssize, mrank, msize;
    OK(catena_comm_rank(sub, &srank));
    OK(catena_comm_size(sub, &ssize));
    OK(catena_comm_load_group_map(sub));
    MPI_Comm_rank(mpi_sub, &mrank);
    MPI_Comm_size(mpi_sub, &msize);
    CHECK(srank == mrank && ssize == msize, "split %d of %d, MPI %d of %d", srank, ssize, mrank,
          msize);
    MPI_Group gsub, ghalf;
    MPI_Comm_group(mpi_sub, &gsub);
    MPI_Comm_group(half, &ghalf);
    for (int r = 0; r < ssize; r++) {
        int in_half, mpi_in_half;
        OK(catena_comm_world_rank(sub, r, &in_half));
        MPI_Group_translate_ranks(gsub, 1, &r, ghalf, &mpi_in_half);
        CHECK(in_half == mpi_in_half, "split rank %d is %d, MPI says %d", r, in_half,
              mpi_in_half);
    }
    MPI_Group_free(&gsub);
    MPI_Group_free(&ghalf);
    MPI_Comm_free(&mpi_sub);

    OK(catena_finalize());
    MPI_Wait(&program, MPI_STATUS_IGNORE);
    MPI_Comm_free(&half);
    MPI_Finalize();
    if (me == 0)
        printf("init_mpi: %d checks passed on each of %d processes\n", checks, wsize);
    return 0;
}
