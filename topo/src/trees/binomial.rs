//! The baseline: a binomial tree over communicator ranks, as IBM's MPI uses
//! for irregular communicators. Round j sends rank i → i + 2^j (relative to
//! the root) along the XYZ-minimal route, blind to the torus.

use crate::{Construction, Edge, Members, MembersError, Node, Schedule, Torus, Tree};

/// The rounds' edges: round j holds the 2^j sends of that round.
pub fn binomial_rounds(
    torus: &Torus,
    order: &[Node],
    root: Node,
) -> Result<Vec<Vec<Edge>>, MembersError> {
    let members = Members::new(torus, order.iter().copied())?;
    members.check_root(root)?;
    let n = order.len();
    let r = order.iter().position(|&x| x == root).expect("a member");
    let node = |relative: usize| order[(relative + r) % n];
    let mut rounds = Vec::new();
    let mut step = 1;
    while step < n {
        rounds.push(
            (0..step.min(n - step))
                .map(|i| {
                    let (from, to) = (node(i), node(i + step));
                    Edge::unicast(from, to, torus.minimal_route(from, to))
                })
                .collect(),
        );
        step *= 2;
    }
    Ok(rounds)
}

/// The binomial tree over `order` (the communicator's ranks in rank order).
pub fn binomial(torus: &Torus, order: &[Node], root: Node) -> Result<Schedule, MembersError> {
    let edges = binomial_rounds(torus, order, root)?.concat();
    Ok(Schedule::new(
        Construction::Binomial,
        vec![Tree { root, edges }],
    ))
}
