/* MPI_Comm_idup is nonblocking: rank 1 starts one, then MPI_Ssends to rank
 * 0, which is in MPI_Recv and starts its idup only after (issue 33's
 * reproducer). Rank 0 gives up after 20 s (an interposer that dups
 * blocking inside the idup holds rank 1 until catena's timeout). Then both
 * complete the idup and split the new communicator, which must give what
 * MPI gives. Prints one line per rank's result. */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

int main(int argc, char **argv) {
    int me, n, token = 42;
    MPI_Comm dup, half;
    MPI_Request request;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n >= 2 && me == 1) {
        MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request);
        MPI_Ssend(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    } else if (n >= 2 && me == 0) {
        MPI_Request got;
        int done = 0;
        MPI_Irecv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &got);
        double deadline = MPI_Wtime() + 20.0;
        while (!done && MPI_Wtime() < deadline)
            MPI_Test(&got, &done, MPI_STATUS_IGNORE);
        if (!done) {
            fprintf(stderr, "idup: rank 1 did not send within 20 s: its MPI_Comm_idup blocked\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request);
    } else {
        MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request);
    }
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    MPI_Comm_split(dup, me % 2, -me, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    printf("rank %d: token %d, half %d of %d\n", me, token, hrank, hsize);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
