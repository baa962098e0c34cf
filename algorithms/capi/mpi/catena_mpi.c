/* libcatena-mpi.so: a PMPI interposition library that gives an unmodified
 * MPI program catena's split. `LD_PRELOAD=libcatena-mpi.so mpiexec ...`:
 * catena starts inside MPI_Init on the program's MPI_COMM_WORLD; each
 * communicator it knows carries its catena communicator as an attribute
 * (duplicated with MPI_Comm_dup, not with the nonblocking MPI_Comm_idup,
 * freed with the communicator); and
 * MPI_Comm_split of a known intracommunicator runs catena's split, then
 * builds the MPI communicator of the new group's members (their ranks in
 * the parent's own group) with PMPI_Comm_create_group, which the new
 * group's members alone call: MPI
 * agrees on a context id among them, with no step over the whole parent
 * and no allgather of colors and keys.
 * Anything else goes to PMPI_Comm_split. Built with Open MPI's mpicc it
 * also takes Open MPI's Fortran entry points (see the end). CATENA_MPI=off
 * turns it off;
 * CATENA_MPI_REPORT=1 has rank 0 say at MPI_Finalize how many splits
 * catena ran. See docs/c-api.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "catena.h"

static int enabled, report;
static int keyval = MPI_KEYVAL_INVALID;
static long by_catena, by_mpi;
/* Seconds in catena's splits and in building their MPI communicators,
 * measured only with CATENA_MPI_REPORT=1: a clock read is a fair part of
 * a split of two. */
static double in_split, in_create;
/* PMPI_Comm_create_group's tag: a process builds one communicator at a
 * time, so one tag serves every split. */
#define CREATE_TAG 0x6361
/* MPI_COMM_WORLD's group, whose ranks (catena's world ranks) are
 * translated into a parent's. */
static MPI_Group world_group = MPI_GROUP_NULL;
/* Members listed on the stack; larger groups take the heap. */
#define ON_STACK 64

static void warn(const char *what, int rc) {
    fprintf(stderr, "libcatena-mpi: %s: %s (%s)\n", what, catena_strerror(rc),
            catena_last_error());
}

/* The catena communicator of `comm`, or NULL if catena does not know it. */
static catena_comm_t *known(MPI_Comm comm) {
    void *value;
    int flag = 0, inter = 0;
    if (!enabled || comm == MPI_COMM_NULL)
        return NULL;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        return NULL;
    PMPI_Comm_get_attr(comm, keyval, &value, &flag);
    return flag ? (catena_comm_t *)value : NULL;
}

/* Set while MPI makes a communicator whose catena side is not a dup of
 * its parent's: under MPI_Comm_idup (catena's dup waits for every member,
 * and a program may talk to them between starting an idup and completing
 * it, so the new communicator gets none and its splits go to
 * PMPI_Comm_split), and under PMPI_Comm_create_group, where Open MPI 4.1
 * copies the parent's attributes too, on the new group's members only
 * (the interposer sets the new communicator's own). */
static int no_copy;

/* MPI_Comm_dup (collective: every member runs it, in the same order). */
static int copy_catena(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag) {
    catena_comm_t *dup;
    (void)old, (void)key, (void)extra;
    if (no_copy) {
        *flag = 0;
        return MPI_SUCCESS;
    }
    *flag = catena_comm_dup((catena_comm_t *)in, &dup) == CATENA_SUCCESS;
    if (*flag)
        *(void **)out = dup;
    return MPI_SUCCESS;
}

static int delete_catena(MPI_Comm comm, int key, void *value, void *extra) {
    catena_comm_t *c = value;
    (void)comm, (void)key, (void)extra;
    /* After catena_finalize the handle is refused, harmlessly. */
    catena_comm_free(&c);
    return MPI_SUCCESS;
}

static void start(int thread_level) {
    const char *setting = getenv("CATENA_MPI");
    catena_comm_t *world;
    int rc;
    if (setting != NULL && strcmp(setting, "off") == 0)
        return;
    /* catena is called from the thread that started it only. */
    if (thread_level == MPI_THREAD_MULTIPLE)
        return;
    rc = catena_init();
    if (rc != CATENA_SUCCESS) {
        warn("catena_init failed; MPI_Comm_split stays MPI's", rc);
        return;
    }
    catena_comm_world(&world);
    const char *reporting = getenv("CATENA_MPI_REPORT");
    report = reporting != NULL && strcmp(reporting, "1") == 0;
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Comm_create_keyval(copy_catena, delete_catena, &keyval, NULL);
    PMPI_Comm_set_attr(MPI_COMM_WORLD, keyval, world);
    enabled = 1;
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        start(MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        start(*provided);
    return rc;
}

int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
    no_copy = 1;
    int rc = PMPI_Comm_idup(comm, newcomm, request);
    no_copy = 0;
    return rc;
}

/* MPI 4 (MPICH 4; Open MPI 4.1 is MPI 3.1 and has no such call). */
#if MPI_VERSION >= 4
int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm,
                            MPI_Request *request) {
    no_copy = 1;
    int rc = PMPI_Comm_idup_with_info(comm, info, newcomm, request);
    no_copy = 0;
    return rc;
}
#endif

/* The MPI communicator of catena's new group `sub` (a member's view),
 * made by its members alone from the parent's own group: their world
 * ranks, translated into the parent's ranks, in group order. (MPICH 4.0.2
 * crashes in MPI_Comm_create_group on a communicator made by MPI_Comm_dup
 * when the group was made from another communicator's group, even an
 * identical one; MPICH alone reproduces it.) */
static int create_for(MPI_Comm parent, catena_comm_t *sub, MPI_Comm *newcomm) {
    int size, rc;
    int stack[2 * ON_STACK], *world = stack, *in_parent = stack + ON_STACK, *heap = NULL;
    MPI_Group parent_group, group;
    if ((rc = catena_comm_size(sub, &size)) != CATENA_SUCCESS)
        return rc;
    if (size > ON_STACK) {
        if ((heap = malloc(2 * sizeof(int) * (size_t)size)) == NULL)
            return CATENA_ERR_INTERNAL;
        world = heap;
        in_parent = heap + size;
    }
    /* Every member of `sub` is here: the map's load is collective over it. */
    if ((rc = catena_comm_load_group_map(sub)) != CATENA_SUCCESS)
        goto out;
    for (int r = 0; r < size; r++)
        if ((rc = catena_comm_world_rank(sub, r, &world[r])) != CATENA_SUCCESS)
            goto out;
    PMPI_Comm_group(parent, &parent_group);
    PMPI_Group_translate_ranks(world_group, size, world, parent_group, in_parent);
    PMPI_Group_incl(parent_group, size, in_parent, &group);
    no_copy = 1;
    if (PMPI_Comm_create_group(parent, group, CREATE_TAG, newcomm) != MPI_SUCCESS)
        rc = CATENA_ERR_TRANSPORT;
    no_copy = 0;
    PMPI_Group_free(&group);
    PMPI_Group_free(&parent_group);
out:
    free(heap);
    return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    catena_comm_t *parent = known(comm), *sub = NULL;
    double start = 0, split_done = 0;
    int rc;
    if (parent == NULL) {
        by_mpi++;
        return PMPI_Comm_split(comm, color, key, newcomm);
    }
    /* Any other negative color is a color like the rest, as MPICH takes it:
     * every rank must take the same path, and no rank sees the others'
     * colors, so none of them can be sent to PMPI_Comm_split alone. */
    if (report)
        start = PMPI_Wtime();
    rc = catena_comm_split(parent, color == MPI_UNDEFINED ? CATENA_UNDEFINED : color, key, &sub);
    if (report) {
        split_done = PMPI_Wtime();
        in_split += split_done - start;
    }
    if (rc != CATENA_SUCCESS) {
        warn("MPI_Comm_split", rc);
        return PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER), MPI_ERR_OTHER;
    }
    by_catena++;
    if (sub == NULL) { /* No group: nothing to build. */
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    rc = create_for(comm, sub, newcomm);
    if (report)
        in_create += PMPI_Wtime() - split_done;
    if (rc != CATENA_SUCCESS) {
        warn("MPI_Comm_split: building the MPI communicator", rc);
        catena_comm_free(&sub);
        return PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER), MPI_ERR_OTHER;
    }
    PMPI_Comm_set_attr(*newcomm, keyval, sub);
    return MPI_SUCCESS;
}

int MPI_Finalize(void) {
    if (enabled) {
        int rank;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (report && rank == 0)
            fprintf(stderr,
                    "libcatena-mpi: rank 0: %ld splits by catena, %ld by MPI; "
                    "%.3f ms in catena's splits, %.3f ms in PMPI_Comm_create_group\n",
                    by_catena, by_mpi, in_split * 1e3, in_create * 1e3);
        /* Attributes still set are deleted by MPI later; their handles are
         * then refused, harmlessly. */
        PMPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
        PMPI_Group_free(&world_group);
        enabled = 0;
        int rc = catena_finalize();
        if (rc != CATENA_SUCCESS)
            warn("catena_finalize", rc);
    }
    return PMPI_Finalize();
}

/* Open MPI's Fortran bindings call its PMPI_* functions, not the C MPI_*
 * entry points above (MPICH's call those), so a Fortran program under Open
 * MPI reaches the interposer only through these, gfortran's names of the
 * `mpi` module's and mpif.h's procedures. */
#ifdef OPEN_MPI
void mpi_init_(MPI_Fint *ierr) {
    *ierr = MPI_Init(NULL, NULL);
}

void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr) {
    int got = 0;
    *ierr = MPI_Init_thread(NULL, NULL, *required, &got);
    *provided = got;
}

void mpi_comm_split_(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                     MPI_Fint *ierr) {
    MPI_Comm made = MPI_COMM_NULL;
    *ierr = MPI_Comm_split(MPI_Comm_f2c(*comm), *color, *key, &made);
    if (*ierr == MPI_SUCCESS)
        *newcomm = MPI_Comm_c2f(made);
}

void mpi_finalize_(MPI_Fint *ierr) {
    *ierr = MPI_Finalize();
}
#endif
