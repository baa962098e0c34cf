//! Every member's message of any length, in member order, in one buffer:
//! what the host's allgather and gather of encoded values hand back (one
//! allocation for all the bytes, not one per member).

/// The most bytes reserved before any message arrives.
const UPFRONT_MAX: usize = 1 << 20;

/// The messages, back to back, and where each one ends.
pub(crate) struct Gathered {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Gathered {
    /// Room for `members` messages of about `each` bytes, up to
    /// [`UPFRONT_MAX`]: others' messages may be shorter than this member's,
    /// and what arrives beyond is reserved as it lands, where running out
    /// of memory is an error, not an abort.
    pub(crate) fn with_capacity(members: usize, each: usize) -> Gathered {
        Gathered {
            bytes: Vec::with_capacity(members.saturating_mul(each).min(UPFRONT_MAX)),
            ends: Vec::with_capacity(members),
        }
    }

    /// The buffer the next message is appended to; [`Gathered::close`]
    /// ends it there.
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Ends the message appended since the last one ended.
    pub(crate) fn close(&mut self) {
        self.ends.push(self.bytes.len());
    }

    /// Member `m`'s message.
    pub(crate) fn get(&self, m: usize) -> &[u8] {
        let start = m.checked_sub(1).map_or(0, |l| self.ends[l]);
        &self.bytes[start..self.ends[m]]
    }

    /// The messages in member order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.ends.len()).map(|m| self.get(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_back_as_they_were_appended() {
        let mut all = Gathered::with_capacity(3, 2);
        for message in [&b"ab"[..], b"", b"cde"] {
            all.buffer().extend_from_slice(message);
            all.close();
        }
        assert_eq!(all.get(1), b"");
        assert_eq!(all.iter().collect::<Vec<_>>(), [&b"ab"[..], b"", b"cde"]);
    }

    #[test]
    fn a_long_message_of_its_own_reserves_no_more_than_the_cap() {
        let all = Gathered::with_capacity(1024, usize::MAX / 2);
        assert!(all.bytes.capacity() <= UPFRONT_MAX);
    }
}
