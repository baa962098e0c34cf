//! Reduction operations on byte buffers: the built-in ones on the standard
//! C types, and a user's callback. A reduction's value is `Some(bytes)`, or
//! `None` once two members' buffers disagreed in length, so a mismatch
//! reaches every member as an error, never an out-of-bounds access.

use std::ffi::{c_int, c_void};

use crate::status::Failure;

/// C types a built-in reduction works on.
pub const CATENA_INT8: c_int = 0;
pub const CATENA_UINT8: c_int = 1;
pub const CATENA_INT16: c_int = 2;
pub const CATENA_UINT16: c_int = 3;
pub const CATENA_INT32: c_int = 4;
pub const CATENA_UINT32: c_int = 5;
pub const CATENA_INT64: c_int = 6;
pub const CATENA_UINT64: c_int = 7;
pub const CATENA_FLOAT: c_int = 8;
pub const CATENA_DOUBLE: c_int = 9;

/// Built-in operations (bitwise ones on integer types only).
pub const CATENA_SUM: c_int = 0;
pub const CATENA_PROD: c_int = 1;
pub const CATENA_MIN: c_int = 2;
pub const CATENA_MAX: c_int = 3;
pub const CATENA_BAND: c_int = 4;
pub const CATENA_BOR: c_int = 5;
pub const CATENA_BXOR: c_int = 6;
pub const CATENA_LAND: c_int = 7;
pub const CATENA_LOR: c_int = 8;

/// A user reduction: `inout[i] = in[i] op inout[i]` for `count` elements,
/// where `in` holds lower ranks' contributions (as `MPI_User_function`).
pub type catena_user_op_fn = Option<
    unsafe extern "C" fn(input: *const c_void, inout: *mut c_void, count: usize, ctx: *mut c_void),
>;

/// A reduction and the size of its elements.
#[derive(Clone, Copy)]
pub(crate) enum Reduction {
    Builtin {
        datatype: c_int,
        op: c_int,
    },
    User {
        op: unsafe extern "C" fn(*const c_void, *mut c_void, usize, *mut c_void),
        ctx: *mut c_void,
        size: usize,
    },
}

macro_rules! for_each_type {
    ($datatype:expr, $apply:ident) => {
        match $datatype {
            CATENA_INT8 => $apply!(i8, int),
            CATENA_UINT8 => $apply!(u8, int),
            CATENA_INT16 => $apply!(i16, int),
            CATENA_UINT16 => $apply!(u16, int),
            CATENA_INT32 => $apply!(i32, int),
            CATENA_UINT32 => $apply!(u32, int),
            CATENA_INT64 => $apply!(i64, int),
            CATENA_UINT64 => $apply!(u64, int),
            CATENA_FLOAT => $apply!(f32, float),
            CATENA_DOUBLE => $apply!(f64, float),
            _ => None,
        }
    };
}

impl Reduction {
    /// Whether the operation is commutative: every built-in one is (a user
    /// operation is taken as associative only, folded in rank order).
    pub(crate) fn commutative(&self) -> bool {
        matches!(self, Reduction::Builtin { .. })
    }

    /// A user operation on elements of `size` bytes (checked when used).
    pub(crate) fn user(
        op: catena_user_op_fn,
        ctx: *mut c_void,
        size: usize,
    ) -> Result<Reduction, Failure> {
        let op = op.ok_or_else(|| Failure::arg("the user operation is NULL"))?;
        Ok(Reduction::User { op, ctx, size })
    }

    /// Checks the type and operation; the element size.
    pub(crate) fn element_size(&self) -> Result<usize, Failure> {
        match *self {
            Reduction::User { size: 0, .. } => {
                Err(Failure::arg("a user operation's element size is 0"))
            }
            Reduction::User { size, .. } => Ok(size),
            Reduction::Builtin { datatype, op } => {
                macro_rules! size {
                    ($t:ty, $kind:ident) => {
                        Some((std::mem::size_of::<$t>(), stringify!($kind) == "int"))
                    };
                }
                let (size, integer) = for_each_type!(datatype, size)
                    .ok_or_else(|| Failure::arg(format!("unknown datatype {datatype}")))?;
                match op {
                    CATENA_SUM | CATENA_PROD | CATENA_MIN | CATENA_MAX => Ok(size),
                    CATENA_BAND | CATENA_BOR | CATENA_BXOR | CATENA_LAND | CATENA_LOR
                        if integer =>
                    {
                        Ok(size)
                    }
                    CATENA_BAND | CATENA_BOR | CATENA_BXOR | CATENA_LAND | CATENA_LOR => {
                        Err(Failure::arg(format!(
                            "operation {op} is for integer types; datatype {datatype} is not one"
                        )))
                    }
                    _ => Err(Failure::arg(format!("unknown operation {op}"))),
                }
            }
        }
    }

    /// `lower op higher`, elementwise; `None` if either is poisoned or
    /// their lengths differ.
    pub(crate) fn combine(
        &self,
        lower: &Option<Vec<u8>>,
        higher: &Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let (lower, higher) = (lower.as_ref()?, higher.as_ref()?);
        if lower.len() != higher.len() {
            return None;
        }
        let mut out = higher.clone();
        match *self {
            Reduction::User { op, ctx, size } => {
                // SAFETY: both buffers hold `len / size` whole elements (the
                // caller's count times size, checked equal across members).
                unsafe {
                    op(
                        lower.as_ptr().cast(),
                        out.as_mut_ptr().cast(),
                        lower.len() / size,
                        ctx,
                    )
                };
            }
            Reduction::Builtin { datatype, op } => {
                macro_rules! apply {
                    ($t:ty, $kind:ident) => {{
                        const N: usize = std::mem::size_of::<$t>();
                        for (o, l) in out.chunks_exact_mut(N).zip(lower.chunks_exact(N)) {
                            let a = <$t>::from_ne_bytes(l.try_into().expect("N bytes"));
                            let b = <$t>::from_ne_bytes((&*o).try_into().expect("N bytes"));
                            o.copy_from_slice(&apply!(@$kind, op, a, b).to_ne_bytes());
                        }
                        Some(())
                    }};
                    (@int, $op:expr, $a:expr, $b:expr) => {
                        match $op {
                            CATENA_SUM => $a.wrapping_add($b),
                            CATENA_PROD => $a.wrapping_mul($b),
                            CATENA_MIN => $a.min($b),
                            CATENA_MAX => $a.max($b),
                            CATENA_BAND => $a & $b,
                            CATENA_BOR => $a | $b,
                            CATENA_BXOR => $a ^ $b,
                            CATENA_LAND => (($a != 0) && ($b != 0)) as _,
                            _ => (($a != 0) || ($b != 0)) as _,
                        }
                    };
                    (@float, $op:expr, $a:expr, $b:expr) => {
                        match $op {
                            CATENA_SUM => $a + $b,
                            CATENA_PROD => $a * $b,
                            CATENA_MIN => $a.min($b),
                            _ => $a.max($b),
                        }
                    };
                }
                for_each_type!(datatype, apply)?;
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Copy>(values: &[T]) -> Option<Vec<u8>> {
        // SAFETY: plain numbers, read as bytes.
        let raw = unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
        };
        Some(raw.to_vec())
    }

    #[test]
    fn builtins_match_plain_arithmetic() {
        let r = |datatype, op| Reduction::Builtin { datatype, op };
        let (a, b) = (bytes(&[3i32, -7, 0]), bytes(&[5i32, 2, 9]));
        assert_eq!(
            r(CATENA_INT32, CATENA_SUM).combine(&a, &b),
            bytes(&[8i32, -5, 9])
        );
        assert_eq!(
            r(CATENA_INT32, CATENA_MIN).combine(&a, &b),
            bytes(&[3i32, -7, 0])
        );
        assert_eq!(
            r(CATENA_INT32, CATENA_LAND).combine(&a, &b),
            bytes(&[1i32, 1, 0])
        );
        assert_eq!(
            r(CATENA_INT32, CATENA_BXOR).combine(&a, &b),
            bytes(&[6i32, -5, 9])
        );
        let (x, y) = (bytes(&[1.5f64, -2.0]), bytes(&[2.0f64, 4.0]));
        assert_eq!(
            r(CATENA_DOUBLE, CATENA_PROD).combine(&x, &y),
            bytes(&[3.0f64, -8.0])
        );
        assert_eq!(
            r(CATENA_UINT8, CATENA_SUM).combine(&bytes(&[250u8]), &bytes(&[10u8])),
            bytes(&[4u8])
        );
    }

    #[test]
    fn bad_types_lengths_and_poison_are_refused() {
        let sum = Reduction::Builtin {
            datatype: CATENA_INT64,
            op: CATENA_SUM,
        };
        assert_eq!(sum.combine(&bytes(&[1i64]), &bytes(&[1i64, 2])), None);
        assert_eq!(sum.combine(&None, &bytes(&[1i64])), None);
        let bad = |datatype, op| Reduction::Builtin { datatype, op }.element_size().is_err();
        assert!(bad(CATENA_FLOAT, CATENA_BAND));
        assert!(bad(99, CATENA_SUM));
        assert!(bad(CATENA_INT8, 99));
        assert_eq!(sum.element_size().unwrap(), 8);
    }
}
