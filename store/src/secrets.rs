//! Secrets objects hold (a registry password an image is pulled with),
//! kept outside the objects' JSON so that no answer, list or event can carry
//! them. The store keeps what it is given, sealed by the server already; it
//! never sees a secret in the clear.

use sqlx::Row as _;

use super::{Store, StoreError};

impl Store {
    /// Keeps `sealed` for the object `owner` (replacing what it held).
    pub async fn put_secret(&self, owner: &str, sealed: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO secrets (owner, sealed) VALUES ($1, $2) ON CONFLICT (owner) DO UPDATE SET sealed = excluded.sealed")
            .bind(owner)
            .bind(sealed)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The sealed secret of `owner`, if it holds one.
    pub async fn secret(&self, owner: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT sealed FROM secrets WHERE owner = $1").bind(owner).fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.try_get("sealed")).transpose()?)
    }

    /// Forgets the secret of `owner` (nothing if it holds none).
    pub async fn delete_secret(&self, owner: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM secrets WHERE owner = $1").bind(owner).execute(&self.pool).await?;
        Ok(())
    }
}
