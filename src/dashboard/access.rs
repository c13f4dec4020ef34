//! Who may use the dashboard: [`Access`], the tokens and the [`Role`]
//! each grants. Nobody may until a token is given.

use std::fmt;
use std::path::Path;

/// What a signed-in caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Role {
    /// See every page; no action.
    ReadOnly,
    /// See every page and act: cancel tasks.
    Full,
}

impl Role {
    /// The role's name as the pages show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::Full => "full",
        }
    }
}

/// The environment variable holding the full role's token.
pub const TOKEN_ENV: &str = "MCP_TASKS_DASHBOARD_TOKEN";
/// The environment variable naming a file that holds the full role's token.
pub const TOKEN_FILE_ENV: &str = "MCP_TASKS_DASHBOARD_TOKEN_FILE";
/// The environment variable holding the read-only role's token.
pub const READ_ONLY_TOKEN_ENV: &str = "MCP_TASKS_DASHBOARD_READ_ONLY_TOKEN";
/// The environment variable naming a file that holds the read-only role's
/// token.
pub const READ_ONLY_TOKEN_FILE_ENV: &str = "MCP_TASKS_DASHBOARD_READ_ONLY_TOKEN_FILE";

/// The shortest token accepted: 16 characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token [`Access`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessError {
    /// Shorter than [`MIN_TOKEN_LEN`] characters (after trimming).
    TooShort,
    /// Not visible ASCII (it is typed in a password field and sent in an
    /// `Authorization` header).
    NotVisibleAscii,
    /// The same token for both roles.
    SameForBothRoles,
    /// A token file could not be read.
    File(String),
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessError::TooShort => write!(
                f,
                "a dashboard token must be at least {MIN_TOKEN_LEN} characters"
            ),
            AccessError::NotVisibleAscii => {
                f.write_str("a dashboard token must be visible ASCII characters only")
            }
            AccessError::SameForBothRoles => {
                f.write_str("the read-only token must differ from the full one")
            }
            AccessError::File(why) => write!(f, "cannot read a dashboard token file: {why}"),
        }
    }
}

impl std::error::Error for AccessError {}

/// The dashboard's tokens: one for the full role, one for the read-only
/// role, each optional. A caller shows one as `Authorization: Bearer …`
/// (scripts) or types it in the sign-in page (browsers, which then hold a
/// session cookie). With neither token set, every request gets 401: the
/// dashboard is off for everyone by default.
///
/// ```
/// use mcp_task_layer::dashboard::Access;
///
/// let access = Access::new()
///     .with_full_token("correct horse battery staple")?
///     .with_read_only_token("a token for the support team")?;
/// # let _ = access;
/// # Ok::<(), mcp_task_layer::dashboard::AccessError>(())
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Access {
    full: Option<String>,
    read_only: Option<String>,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("full", &self.full.as_ref().map(|_| "<set>"))
            .field("read_only", &self.read_only.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Access {
    /// No token: every request is refused.
    pub fn new() -> Self {
        Access::default()
    }

    /// The key that signs the session cookies of `role`: a SHA-256 of that
    /// role's token alone, so that every process given the same token
    /// signs alike, a new token signs its role's browsers out, and a
    /// holder of one role's token can compute no other role's key. `None`
    /// for a role without a token: no cookie of it is signed or accepted.
    pub(crate) fn session_key(&self, role: Role) -> Option<[u8; 32]> {
        use sha2::Digest;
        let (tag, token) = match role {
            Role::Full => (b'f', self.full.as_deref()?),
            Role::ReadOnly => (b'r', self.read_only.as_deref()?),
        };
        let mut hash = sha2::Sha256::new();
        hash.update(b"mcp-tasks dashboard sessions v2");
        hash.update([tag]);
        hash.update((token.len() as u64).to_be_bytes());
        hash.update(token.as_bytes());
        Some(hash.finalize().into())
    }

    /// The tokens of the environment: the full role's from
    /// [`TOKEN_ENV`] (or the file [`TOKEN_FILE_ENV`] names), the read-only
    /// role's from [`READ_ONLY_TOKEN_ENV`] (or [`READ_ONLY_TOKEN_FILE_ENV`]).
    /// Unset variables leave the role without a token.
    pub fn from_env() -> Result<Self, AccessError> {
        let mut access = Access::new();
        if let Some(token) = from_env_or_file(TOKEN_ENV, TOKEN_FILE_ENV)? {
            access = access.with_full_token(token)?;
        }
        if let Some(token) = from_env_or_file(READ_ONLY_TOKEN_ENV, READ_ONLY_TOKEN_FILE_ENV)? {
            access = access.with_read_only_token(token)?;
        }
        Ok(access)
    }

    /// The full role's token.
    pub fn with_full_token(self, token: impl Into<String>) -> Result<Self, AccessError> {
        self.with_token(Role::Full, token.into())
    }

    /// The read-only role's token.
    pub fn with_read_only_token(self, token: impl Into<String>) -> Result<Self, AccessError> {
        self.with_token(Role::ReadOnly, token.into())
    }

    fn with_token(mut self, role: Role, token: String) -> Result<Self, AccessError> {
        let token = checked(token)?;
        let (slot, other) = match role {
            Role::Full => (&mut self.full, &self.read_only),
            Role::ReadOnly => (&mut self.read_only, &self.full),
        };
        if other.as_deref() == Some(&token) {
            return Err(AccessError::SameForBothRoles);
        }
        *slot = Some(token);
        Ok(self)
    }

    /// The full role's token read from the first line of the file `path`.
    pub fn with_full_token_file(self, path: impl AsRef<Path>) -> Result<Self, AccessError> {
        let token = read_token_file(path.as_ref())?;
        self.with_full_token(token)
    }

    /// Whether any token is set (else the dashboard refuses everyone).
    pub fn is_enabled(&self) -> bool {
        self.full.is_some() || self.read_only.is_some()
    }

    /// The role `presented` grants, if it is one of the tokens. Compared in
    /// time independent of where the texts differ.
    pub(crate) fn role_of(&self, presented: &str) -> Option<Role> {
        let full = self
            .full
            .as_deref()
            .is_some_and(|t| same_secret(t, presented));
        let read_only = self
            .read_only
            .as_deref()
            .is_some_and(|t| same_secret(t, presented));
        if full {
            Some(Role::Full)
        } else if read_only {
            Some(Role::ReadOnly)
        } else {
            None
        }
    }
}

fn checked(token: String) -> Result<String, AccessError> {
    let token = token.trim().to_owned();
    if !token.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(AccessError::NotVisibleAscii);
    }
    if token.len() < MIN_TOKEN_LEN {
        return Err(AccessError::TooShort);
    }
    Ok(token)
}

fn read_token_file(path: &Path) -> Result<String, AccessError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AccessError::File(format!("{}: {e}", path.display())))?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

fn from_env_or_file(var: &str, file_var: &str) -> Result<Option<String>, AccessError> {
    if let Some(token) = std::env::var_os(var) {
        let token = token
            .into_string()
            .map_err(|_| AccessError::NotVisibleAscii)?;
        return Ok(Some(token));
    }
    match std::env::var_os(file_var) {
        Some(path) => read_token_file(Path::new(&path)).map(Some),
        None => Ok(None),
    }
}

/// `a == b`, in time that depends on their lengths only.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_roles() {
        assert_eq!(
            Access::new().with_full_token("short").err(),
            Some(AccessError::TooShort)
        );
        assert_eq!(
            Access::new().with_full_token("é".repeat(20)).err(),
            Some(AccessError::NotVisibleAscii)
        );
        let access = Access::new()
            .with_full_token("full-token-0123456789")
            .unwrap()
            .with_read_only_token("read-token-0123456789")
            .unwrap();
        assert_eq!(access.role_of("full-token-0123456789"), Some(Role::Full));
        assert_eq!(
            access.role_of("read-token-0123456789"),
            Some(Role::ReadOnly)
        );
        assert_eq!(access.role_of("full-token-012345678"), None);
        assert_eq!(access.role_of(""), None);
        assert_eq!(
            access.with_read_only_token("full-token-0123456789").err(),
            Some(AccessError::SameForBothRoles)
        );
        assert!(!Access::new().is_enabled());
        assert_eq!(Access::new().role_of("anything at all here"), None);
    }
}
