//! The random-member chain (2D and its 3D extension): not built yet.

use crate::{Members, MembersError, Node, Schedule, Torus};

pub fn chain(_torus: &Torus, _members: &Members, _root: Node) -> Result<Schedule, MembersError> {
    Err(MembersError::Shape("the chain construction is not built yet".into()))
}
