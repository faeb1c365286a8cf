//! The page's "Preview delete": which objects it offers a preview for (the
//! Stacks and ManagedServices its watches see), and the request it sends,
//! read fail closed. The preview itself is `crate::preview`, the same as
//! `kubectl navique preview delete`.

use serde::Serialize;

use super::view::Watched;
use crate::Error;

/// A Stack or ManagedService whose delete the page can preview.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deletable {
    pub namespace: String,
    pub kind: String,
    pub name: String,
}

/// The Stacks and ManagedServices the watches see, by namespace, kind and name.
pub fn deletable(stacks: &Watched, services: &Watched) -> Vec<Deletable> {
    let mut items: Vec<Deletable> = [(stacks, "Stack"), (services, "ManagedService")]
        .into_iter()
        .flat_map(|(watched, kind)| {
            watched.objects.iter().map(move |v| Deletable {
                namespace: v["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                kind: kind.to_owned(),
                name: v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            })
        })
        .collect();
    items.sort();
    items
}

/// `GET <page>/api/preview?kind=Stack&namespace=forge&name=forge`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviewRequest {
    /// `Stack` or `ManagedService`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

impl PreviewRequest {
    /// The API group of the kind.
    pub fn group(&self) -> &'static str {
        match self.kind {
            "Stack" => navique_api::constants::CORE_GROUP,
            _ => navique_api::constants::SERVICES_GROUP,
        }
    }

    /// Reads the query: exactly `kind`, `namespace` and `name`, each once,
    /// a known kind and Kubernetes names (no escapes needed, none taken).
    pub fn parse(query: Option<&str>) -> Result<Self, Error> {
        let bad = Error::PreviewRequest;
        let (mut kind, mut namespace, mut name) = (None, None, None);
        for pair in query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
            let slot = match key {
                "kind" => &mut kind,
                "namespace" => &mut namespace,
                "name" => &mut name,
                other => return Err(bad(format!("unknown parameter {other:?}"))),
            };
            if slot.replace(value).is_some() {
                return Err(bad(format!("{key} given twice")));
            }
        }
        let kind = match kind {
            Some("Stack") => "Stack",
            Some("ManagedService") => "ManagedService",
            other => {
                return Err(bad(format!(
                    "kind must be Stack or ManagedService, not {:?}",
                    other.unwrap_or_default()
                )));
            }
        };
        let object_name = |field: &str, value: Option<&str>, max: usize| {
            let value = value.unwrap_or_default();
            let ok = !value.is_empty()
                && value.len() <= max
                && value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
                && value.starts_with(|c: char| c.is_ascii_alphanumeric())
                && value.ends_with(|c: char| c.is_ascii_alphanumeric());
            if ok {
                Ok(value.to_owned())
            } else {
                Err(bad(format!("{field}: {value:?} is not an object name")))
            }
        };
        Ok(Self {
            kind,
            namespace: object_name("namespace", namespace, 63)?,
            name: object_name("name", name, 253)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_page_offers_every_stack_and_service_it_sees() {
        let watched = |objects| Watched {
            synced: true,
            error: None,
            objects,
        };
        let stacks = watched(vec![json!({"metadata": {"namespace": "b", "name": "web"}})]);
        let services = watched(vec![
            json!({"metadata": {"namespace": "a", "name": "orders-db"}}),
        ]);
        let names: Vec<_> = deletable(&stacks, &services)
            .into_iter()
            .map(|d| format!("{}/{}/{}", d.namespace, d.kind, d.name))
            .collect();
        assert_eq!(names, ["a/ManagedService/orders-db", "b/Stack/web"]);
    }

    #[test]
    fn a_preview_request_names_a_known_kind_and_kubernetes_names() {
        let request =
            PreviewRequest::parse(Some("kind=Stack&namespace=forge&name=web.v1")).unwrap();
        assert_eq!(
            (
                request.kind,
                request.namespace.as_str(),
                request.name.as_str(),
                request.group()
            ),
            ("Stack", "forge", "web.v1", "core.navique.com")
        );
        assert_eq!(
            PreviewRequest::parse(Some("name=db&namespace=a&kind=ManagedService"))
                .unwrap()
                .group(),
            "services.kube-dc.com"
        );
    }

    // fail closed: anything else is refused, naming what is wrong.
    #[test]
    fn anything_else_is_refused_naming_the_parameter() {
        for (query, why) in [
            (None, "kind must be Stack or ManagedService, not \"\""),
            (
                Some("kind=Secret&namespace=a&name=b"),
                "kind must be Stack or ManagedService, not \"Secret\"",
            ),
            (
                Some("kind=stack&namespace=a&name=b"),
                "kind must be Stack or ManagedService, not \"stack\"",
            ),
            (
                Some("kind=Stack&namespace=a&name=b&kind=Stack"),
                "kind given twice",
            ),
            (
                Some("kind=Stack&namespace=a&name=b&cascade=orphan"),
                "unknown parameter \"cascade\"",
            ),
            (
                Some("kind=Stack&namespace=a%2Fb&name=b"),
                "namespace: \"a%2Fb\" is not an object name",
            ),
            (
                Some("kind=Stack&namespace=a&name=../x"),
                "name: \"../x\" is not an object name",
            ),
            (
                Some("kind=Stack&namespace=a"),
                "name: \"\" is not an object name",
            ),
            (Some("kind"), "\"kind\" is not key=value"),
        ] {
            assert_eq!(
                PreviewRequest::parse(query).unwrap_err().to_string(),
                format!("invalid preview request: {why}"),
                "{query:?}"
            );
        }
    }
}
