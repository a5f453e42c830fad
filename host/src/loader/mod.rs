//! Where plugins come from at run time: files and directories watched for changes
//! ([`files`]), and `ReconcilerPlugin` resources ([`resource`]). Both hand modules to
//! [`crate::host::Host::install`], which starts, swaps or refuses them.

pub mod fetch;
pub mod files;
pub mod resource;
