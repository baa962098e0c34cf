//! Set-up: in each colour, parents invite their children top-down (so the
//! root's rank travels with the invitations), and a child accepts only its
//! own parent's invitation; the two ends of each edge swap window keys and
//! endpoints.

use catena_fabric::{ContextId, LocalWindow, Rank, RemoteKey, Rma, Tag, Time, Transport};
use serde::{Deserialize, Serialize};

use super::window::{Endpoint, Layout, Rings};
use super::{Colour, Edge, PipelineConfig, TreeCollective, TreePlace, TreePlan};
use crate::chain::{CallTags, Chain};
use crate::codec::{decode, encode};
use crate::{Error, Result};

/// What both ends of every edge must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Terms {
    colours: u64,
    chunk: u64,
    slots: u64,
    concurrent: bool,
}

#[derive(Serialize, Deserialize)]
struct Invitation {
    root: Rank,
    terms: Terms,
    key: Vec<u8>,
    endpoint: Endpoint,
}

#[derive(Serialize, Deserialize)]
enum Reply {
    Accept { key: Vec<u8>, endpoint: Endpoint },
    Reject { reason: String },
}

/// What this process brings to each of its edges, and the call whose tags
/// its set-up messages take (two rounds per colour).
struct Offer {
    context: ContextId,
    tags: CallTags,
    terms: Terms,
    key: Vec<u8>,
}

impl Offer {
    fn invitation_tag(&self, colour: usize) -> Result<Tag> {
        self.tags.round(round(colour, 0)?)
    }

    fn reply_tag(&self, colour: usize) -> Result<Tag> {
        self.tags.round(round(colour, 1)?)
    }
}

fn round(colour: usize, step: u32) -> Result<u32> {
    u32::try_from(colour)
        .ok()
        .and_then(|c| c.checked_mul(2))
        .map(|r| r + step)
        .ok_or_else(|| Error::InvalidArgument(format!("a plan of {colour} colours")))
}

/// Sets the plan up over `chain`'s members with the tags of one call on it
/// (`tags`, reserved when the caller was called).
pub(super) async fn connect<'t, T: Transport>(
    t: &'t T,
    chain: &Chain,
    tags: CallTags,
    plan: TreePlan,
    config: PipelineConfig,
    deadline: Time,
) -> Result<TreeCollective<'t, T>> {
    check(t, &plan, &config)?;
    let edges = plan
        .colours
        .iter()
        .map(|place| usize::from(place.parent.is_some()) + place.children.len())
        .sum();
    let mut layout = Layout::new(edges, config.slots, config.chunk)?;
    let window = t.alloc_window(layout.len())?;
    let offer = Offer {
        context: chain.context(),
        tags,
        terms: Terms {
            colours: plan.colours.len() as u64,
            chunk: config.chunk as u64,
            slots: config.slots as u64,
            concurrent: plan.concurrent_allreduce,
        },
        key: window.key().as_bytes().to_vec(),
    };

    // Invitations in every colour first, replies after: a process waits
    // only for its parents meanwhile, so the colours proceed together.
    let mut roots = Vec::with_capacity(plan.colours.len());
    let mut joined = Vec::with_capacity(plan.colours.len());
    for (colour, place) in plan.colours.iter().enumerate() {
        let (root, parent) = match place.parent {
            None => (t.rank(), None),
            Some(parent) => {
                let local = layout.endpoint();
                let (root, edge) = join(t, &offer, colour, parent, local, deadline).await?;
                (root, Some(edge))
            }
        };
        let mut locals = Vec::with_capacity(place.children.len());
        for &child in &place.children {
            let endpoint = layout.endpoint();
            let invitation = Invitation {
                root,
                terms: offer.terms,
                key: offer.key.clone(),
                endpoint,
            };
            let invitation = encode(&invitation, "a tree pipeline invitation")?;
            let tag = offer.invitation_tag(colour)?;
            t.send(child, offer.context, tag, &invitation, deadline)
                .await?;
            locals.push(endpoint);
        }
        roots.push(root);
        joined.push((parent, locals));
    }
    if roots.iter().any(|&root| root != roots[0]) {
        return Err(Error::Mismatch {
            what: format!(
                "the plan's root: rank {} finds roots {roots:?} in its colours",
                t.rank()
            ),
        });
    }

    let mut colours = Vec::with_capacity(plan.colours.len());
    for (colour, (place, (parent, locals))) in plan.colours.iter().zip(joined).enumerate() {
        let mut children = Vec::with_capacity(place.children.len());
        for (&child, local) in place.children.iter().zip(locals) {
            let tag = offer.reply_tag(colour)?;
            let reply = t.recv(Some(child), offer.context, tag, deadline).await?;
            match decode(&reply.data, "a tree pipeline reply")? {
                Reply::Accept { key, endpoint } => children.push(Edge {
                    rank: child,
                    key: RemoteKey::from_bytes(&key)?,
                    local,
                    remote: endpoint,
                }),
                Reply::Reject { reason } => return Err(Error::Mismatch { what: reason }),
            }
        }
        colours.push(Colour {
            parent,
            children,
            down: 0,
            up: 0,
        });
    }
    Ok(TreeCollective {
        t,
        window,
        rings: Rings {
            slots: offer.terms.slots,
            chunk: config.chunk,
        },
        concurrent: plan.concurrent_allreduce,
        colours,
        in_call: false,
    })
}

/// Accepts the invitation of `parent` in `colour`: the colour's root and
/// the edge. Any other inviter lists this process as a child by mistake: it
/// is told so, and the plan fails here.
async fn join<T: Transport>(
    t: &T,
    offer: &Offer,
    colour: usize,
    parent: Rank,
    local: Endpoint,
    deadline: Time,
) -> Result<(Rank, Edge)> {
    let message = t
        .recv(None, offer.context, offer.invitation_tag(colour)?, deadline)
        .await?;
    let me = t.rank();
    let invitation: Invitation = decode(&message.data, "a tree pipeline invitation")?;
    let disagreement = if message.source != parent {
        Some(format!(
            "the plan: rank {} lists rank {me} as a child in colour {colour}, \
             but rank {me}'s parent there is rank {parent}",
            message.source
        ))
    } else if invitation.terms != offer.terms {
        Some(format!(
            "the pipeline's terms: rank {parent} has {:?}, its child rank {me} has {:?}",
            invitation.terms, offer.terms
        ))
    } else {
        None
    };
    let reply = match &disagreement {
        Some(reason) => Reply::Reject {
            reason: reason.clone(),
        },
        None => Reply::Accept {
            key: offer.key.clone(),
            endpoint: local,
        },
    };
    let reply = encode(&reply, "a tree pipeline reply")?;
    t.send(
        message.source,
        offer.context,
        offer.reply_tag(colour)?,
        &reply,
        deadline,
    )
    .await?;
    if let Some(reason) = disagreement {
        return Err(Error::Mismatch { what: reason });
    }
    let edge = Edge {
        rank: parent,
        key: RemoteKey::from_bytes(&invitation.key)?,
        local,
        remote: invitation.endpoint,
    };
    Ok((invitation.root, edge))
}

/// What this process can check alone: the configuration, and that each
/// colour's place names valid, distinct ranks other than its own.
fn check<T: Rma>(t: &T, plan: &TreePlan, config: &PipelineConfig) -> Result<()> {
    if config.chunk == 0 || config.slots == 0 {
        return Err(Error::InvalidArgument(format!(
            "a pipeline of {} slots of {} bytes",
            config.slots, config.chunk
        )));
    }
    if plan.colours.is_empty() {
        return Err(Error::InvalidArgument("a plan with no colours".into()));
    }
    let (me, size) = (t.rank(), t.size());
    for (colour, TreePlace { parent, children }) in plan.colours.iter().enumerate() {
        let mut seen: Vec<Rank> = children.iter().chain(parent).copied().collect();
        seen.sort_unstable();
        let repeated = seen.windows(2).any(|w| w[0] == w[1]);
        if repeated || seen.iter().any(|&r| r == me || r >= size) {
            return Err(Error::InvalidArgument(format!(
                "rank {me} of {size} in colour {colour}: parent {parent:?}, children \
                 {children:?} (each must be another rank, and only once)"
            )));
        }
    }
    Ok(())
}
