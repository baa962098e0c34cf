//! Several sub-communicators' pairwise link-disjoint chains: not built yet.

use crate::{Members, MembersError, Node, Schedule, Torus};

pub fn disjoint_chains(
    _torus: &Torus,
    _groups: &[(Members, Node)],
) -> Result<Vec<Schedule>, MembersError> {
    Err(MembersError::Shape("not built yet".into()))
}
