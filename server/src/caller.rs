//! Who is asking: an authenticated [`Caller`] and its [`Role`], as the
//! token checks ([`crate::auth`], [`crate::oidc`]) make them and every
//! handler reads them.

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Publishes templates and sees every tenant's VMs.
    Admin,
    /// Manages its own tenant's VMs.
    Tenant,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who.
    pub subject: String,
    /// The tenant acted in.
    pub tenant: String,
    /// What they may do.
    pub role: Role,
}

impl Caller {
    /// Whether the caller is an administrator.
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Fails with 403 unless the caller is an administrator.
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.is_admin() { Ok(()) } else { Err(ApiError::forbidden(format!("only administrators may {what}"))) }
    }
}
