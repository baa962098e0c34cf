/* Times MPI_Comm_split on MPI_COMM_WORLD: 5 groups (rank mod 5), reversed
 * keys, REPS times after 3 warm-ups; prints the median over repetitions of
 * the slowest rank's time. Run it with and without
 * LD_PRELOAD=libcatena-mpi.so to compare MPICH's split with catena's
 * (ci/interposer-figures.sh). */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#define REPS 21

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int me, n;
    double slowest[REPS];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int rep = -3; rep < REPS; rep++) {
        MPI_Comm comm;
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        MPI_Comm_split(MPI_COMM_WORLD, me % 5, n - me, &comm);
        double took = MPI_Wtime() - start, max;
        MPI_Comm_free(&comm);
        MPI_Reduce(&took, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rep >= 0)
            slowest[rep] = max;
    }
    if (me == 0) {
        qsort(slowest, REPS, sizeof *slowest, by_value);
        printf("N = %d: MPI_Comm_split median %.4f ms (slowest rank; min %.4f, max %.4f)\n", n,
               slowest[REPS / 2] * 1e3, slowest[0] * 1e3, slowest[REPS - 1] * 1e3);
    }
    MPI_Finalize();
    return 0;
}
