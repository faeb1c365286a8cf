//! The object store archives go to, built from `--store-url`.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreScheme};
use url::Url;

use crate::Error;

/// Environment variables the stores' builders read (as their `from_env`
/// does): credentials, region, endpoint, AWS_ALLOW_HTTP...
const ENV_PREFIXES: [&str; 3] = ["AWS_", "GOOGLE_", "AZURE_"];

/// An object store rooted at the URL's path, and that URL to report where
/// each object is.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    base: String,
}

impl Store {
    /// Builds the store for `url`, with settings from the environment.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let options = std::env::vars().filter(|(key, _)| {
            ENV_PREFIXES
                .iter()
                .any(|prefix| key.to_ascii_uppercase().starts_with(prefix))
        });
        Self::from_url_opts(url, options)
    }

    /// Builds the store for `url` with explicit builder options (keys as in
    /// the environment, e.g. `AWS_ENDPOINT`).
    pub fn from_url_opts(
        url: &str,
        options: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Error> {
        let invalid = |reason: String| Error::StoreUrl {
            url: url.to_owned(),
            reason,
        };
        let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        let (scheme, _) = ObjectStoreScheme::parse(&parsed).map_err(|e| invalid(e.to_string()))?;
        if !matches!(
            scheme,
            ObjectStoreScheme::Local
                | ObjectStoreScheme::AmazonS3
                | ObjectStoreScheme::GoogleCloudStorage
                | ObjectStoreScheme::MicrosoftAzure
        ) {
            return Err(invalid(
                "use file:///path, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix"
                    .to_owned(),
            ));
        }
        if scheme == ObjectStoreScheme::Local {
            // Fail at start-up, not at the first backup, on a folder that
            // cannot be made.
            std::fs::create_dir_all(parsed.path())
                .map_err(|e| invalid(format!("cannot create {}: {e}", parsed.path())))?;
        }
        // The cloud stores' HTTP client takes the process's rustls provider;
        // ring is kube's too (main installs it first; this covers library use).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (store, prefix) =
            object_store::parse_url_opts(&parsed, options).map_err(|e| invalid(e.to_string()))?;
        let inner: Arc<dyn ObjectStore> = if prefix.as_ref().is_empty() {
            Arc::from(store)
        } else {
            Arc::new(PrefixStore::new(store, prefix))
        };
        Ok(Self {
            inner,
            base: url.trim_end_matches('/').to_owned(),
        })
    }

    pub fn inner(&self) -> &dyn ObjectStore {
        &*self.inner
    }

    /// The URL of `key`, e.g. `s3://bucket/prefix/<key>`.
    pub fn location(&self, key: &str) -> String {
        format!("{}/{key}", self.base)
    }

    /// The key of `location` when it is in this store: the inverse of
    /// [`Self::location`].
    pub fn key_of(&self, location: &str) -> Option<String> {
        location
            .strip_prefix(&self.base)?
            .strip_prefix('/')
            .filter(|key| !key.is_empty())
            .map(str::to_owned)
    }

    /// `key` as a store path.
    pub fn path(&self, key: &str) -> Path {
        Path::from(key)
    }

    /// Deletes `key`; a missing object counts as deleted.
    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        match self.inner.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::store("delete", self.location(key))(e)),
        }
    }

    /// Deletes every object under the folder `folder`.
    pub async fn delete_under(&self, folder: &str) -> Result<(), Error> {
        let objects: Vec<Path> = self
            .inner
            .list(Some(&self.path(folder)))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .map_err(Error::store("list", self.location(folder)))?;
        for path in objects {
            self.delete(path.as_ref()).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_join_the_url_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}/", dir.path().display());
        let store = Store::from_url_opts(&url, []).unwrap();
        assert_eq!(
            store.location("ns/a-1/b.dump"),
            format!("file://{}/ns/a-1/b.dump", dir.path().display())
        );
        let s3 = Store::from_url_opts(
            "s3://backups/navique",
            [("AWS_REGION".to_owned(), "eu-west-1".to_owned())],
        )
        .unwrap();
        assert_eq!(s3.location("k"), "s3://backups/navique/k");
        assert_eq!(
            s3.key_of("s3://backups/navique/ns/a-1/b.dump").as_deref(),
            Some("ns/a-1/b.dump")
        );
        assert_eq!(s3.key_of("s3://backups/navique-old/ns/a-1/b.dump"), None);
        assert_eq!(s3.key_of("s3://backups/navique/"), None);
    }

    #[test]
    fn unsupported_urls_are_refused_with_the_supported_forms() {
        for url in ["memory:///", "https://example.com/x", "not a url"] {
            let error = Store::from_url_opts(url, []).unwrap_err().to_string();
            assert!(error.starts_with("invalid --store-url"), "{url}: {error}");
        }
    }
}
