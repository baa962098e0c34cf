//! How values travel: any `serde` type, encoded with `postcard` (compact,
//! deterministic for a given value, so packed colors compare byte-wise).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Error, Result};

/// A value that can be sent between processes.
pub trait Wire: Serialize + DeserializeOwned {}
impl<T: Serialize + DeserializeOwned> Wire for T {}

pub(crate) fn encode<T: Serialize + ?Sized>(value: &T, what: &'static str) -> Result<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| Error::Codec {
        action: "encode",
        what,
        message: e.to_string(),
    })
}

/// Appends `value`'s encoding to `out` and says how many bytes it took;
/// on an error `out` is as it was.
pub(crate) fn encode_appended<T: Serialize + ?Sized>(
    value: &T,
    what: &'static str,
    out: &mut Vec<u8>,
) -> Result<usize> {
    let failed = |e: postcard::Error| Error::Codec {
        action: "encode",
        what,
        message: e.to_string(),
    };
    let len = postcard::experimental::serialized_size(value).map_err(failed)?;
    let start = out.len();
    out.resize(start + len, 0);
    if let Err(e) = postcard::to_slice(value, &mut out[start..]) {
        out.truncate(start);
        return Err(failed(e));
    }
    Ok(len)
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &'static str) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::Codec {
        action: "decode",
        what,
        message: e.to_string(),
    })
}
