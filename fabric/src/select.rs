//! The one place that picks a provider by its name at run time, so the
//! launcher, the C API, tests and benchmarks are each written once for
//! every provider of the build.

use crate::catalog::{default_provider, AUTO, PROVIDERS};
use crate::{Error, Provider, Result};

/// Code to run on a provider chosen by name at run time. A generic function
/// cannot be passed as a value, so it comes as a type with a generic method.
pub trait WithProvider {
    /// What the code returns.
    type Output;
    /// Runs the code on provider `P`.
    fn run<P: Provider>(self) -> Self::Output;
}

/// Runs `task` on the provider called `name` (one of [`PROVIDERS`], or
/// [`AUTO`] for [`default_provider`]). Any other name is
/// `Error::Unavailable`, listing the providers of this build.
pub fn with_provider<W: WithProvider>(name: &str, task: W) -> Result<W::Output> {
    let name = if name == AUTO {
        default_provider()
    } else {
        name
    };
    match name {
        "shm" => Ok(task.run::<crate::shm::ShmTransport>()),
        #[cfg(feature = "ofi")]
        "ofi" => Ok(task.run::<crate::ofi::OfiTransport>()),
        #[cfg(feature = "ucx")]
        "ucx" => Ok(task.run::<crate::ucx::UcxTransport>()),
        _ => Err(Error::Unavailable(Box::new(crate::Unavailable {
            requested: name.into(),
            why: "this build has no provider of that name (ofi and ucx need \
                  the cargo features of the same name)"
                .into(),
            available: PROVIDERS.join(", "),
        }))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Says which provider it ran on.
    struct Name;

    impl WithProvider for Name {
        type Output = &'static str;
        fn run<P: Provider>(self) -> &'static str {
            P::NAME
        }
    }

    #[test]
    fn every_listed_name_runs_on_its_provider() {
        for &name in PROVIDERS {
            assert_eq!(with_provider(name, Name).unwrap(), name);
        }
    }

    #[test]
    fn an_unknown_name_is_unavailable_and_lists_the_providers() {
        for name in ["tcp", "", "SHM", "ofi/shm"] {
            match with_provider(name, Name) {
                Err(Error::Unavailable(unavailable)) => {
                    assert_eq!(unavailable.requested, name);
                    assert_eq!(unavailable.available, PROVIDERS.join(", "));
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
        let message = with_provider("tcp", Name).unwrap_err().to_string();
        assert!(message.contains("provider tcp is unavailable"), "{message}");
        assert!(message.contains("available here: shm"), "{message}");
    }
}
