//! Network topology models for catena (torus, mesh, fat-tree), routes and
//! link loads. Pure computation: no I/O, no transport.
