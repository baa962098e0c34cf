! MPI_Comm_split from Fortran (MPICH's mpi module), the ways real codes
! call it: MPI_UNDEFINED, key ties, reversed keys, a split of a split and
! of a dup, many communicators alive; each result is checked with
! MPI_Allreduce and MPI_Bcast and printed, so that runs with and without
! libcatena-mpi.so can be compared line for line.
program split_patterns
  use mpi
  implicit none
  integer :: ierr, me, n, i
  integer :: halves, rows, sub_of_rows, dupped, sub_of_dup, sparse
  integer :: kept(8)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)

  ! Reversed keys.
  call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), -me, halves, ierr)
  call show('halves', halves)
  ! Key ties: every key 0, so the parent's order decides.
  call MPI_Comm_split(MPI_COMM_WORLD, me / 3, 0, rows, ierr)
  call show('rows', rows)
  ! A split of a split.
  call MPI_Comm_split(rows, mod(me, 2), me, sub_of_rows, ierr)
  call show('rows/parity', sub_of_rows)
  ! A split of a dup.
  call MPI_Comm_dup(MPI_COMM_WORLD, dupped, ierr)
  call MPI_Comm_split(dupped, mod(me, 3), n - me, sub_of_dup, ierr)
  call show('dup/thirds', sub_of_dup)
  ! MPI_UNDEFINED: only every third process joins.
  if (mod(me, 3) == 0) then
    call MPI_Comm_split(MPI_COMM_WORLD, 0, me, sparse, ierr)
  else
    call MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, me, sparse, ierr)
  end if
  if (mod(me, 3) /= 0 .and. sparse /= MPI_COMM_NULL) then
    print '(a,i0)', 'undefined color got a communicator on ', me
  end if
  if (sparse /= MPI_COMM_NULL) call show('every third', sparse)
  ! Many alive at once.
  do i = 1, 8
    call MPI_Comm_split(MPI_COMM_WORLD, mod(me + i, 3), mod(me * i, 5), kept(i), ierr)
  end do
  do i = 1, 8
    call show('kept', kept(i))
  end do

  call MPI_Finalize(ierr)

contains

  ! Prints, from the communicator's rank 0, its size, the world ranks of
  ! its members in rank order (an MPI_Allreduce of a one-hot vector) and
  ! what MPI_Bcast from its rank 0 carries.
  subroutine show(what, comm)
    character(len=*), intent(in) :: what
    integer, intent(in) :: comm
    integer :: rank, size, value, err, line(64), members(64)
    call MPI_Comm_rank(comm, rank, err)
    call MPI_Comm_size(comm, size, err)
    line = -1
    line(rank + 1) = me
    call MPI_Allreduce(line, members, 64, MPI_INTEGER, MPI_MAX, comm, err)
    value = 1000 + me
    call MPI_Bcast(value, 1, MPI_INTEGER, 0, comm, err)
    if (rank == 0) then
      print '(a,a,i0,a,64(1x,i0))', what, ': size ', size, ', members', members(1:size)
    end if
    if (value /= 1000 + members(1)) print '(a,i0)', 'bcast went wrong on ', me
  end subroutine show
end program split_patterns
