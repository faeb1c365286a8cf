//! The kubeconfig user's bearer token, which `approvals --watch` sends to
//! the `ApprovalEvents` service so that it shows what this user may see.

use http::header::AUTHORIZATION;
use kube::Config;
use kube::client::{Body, ConfigExt};
use tower::{Layer, ServiceExt};

use crate::Error;

/// The `authorization` value (`Bearer <token>`) that kube would send the
/// API server for `config`'s user: its `token`, `tokenFile`, exec plugin
/// or auth provider, run by kube's own auth layer (so a token file is read
/// and an exec plugin runs exactly as for API calls).
pub async fn bearer(config: &Config) -> Result<String, Error> {
    let layer = config
        .auth_layer()
        .map_err(|e| Error::Credentials(navique_runtime::one_line(&e)))?;
    let Some(layer) = layer else {
        return Err(Error::NoBearerToken(without_token(config)));
    };
    // kube's layer sets the header on a request: answer it with the header
    // instead of sending it anywhere.
    let capture = tower::service_fn(|request: http::Request<Body>| async move {
        let mut echo = http::Response::new(());
        *echo.headers_mut() = request.headers().clone();
        Ok::<_, tower::BoxError>(echo)
    });
    let echo = layer
        .layer(capture)
        .oneshot(http::Request::new(Body::empty()))
        .await
        .map_err(|e| Error::Credentials(navique_runtime::one_line(&*e)))?;
    match echo.headers().get(AUTHORIZATION).map(|v| v.to_str()) {
        Some(Ok(value)) if value.starts_with("Bearer ") => Ok(value.to_owned()),
        _ => Err(Error::NoBearerToken(without_token(config))),
    }
}

/// What the kubeconfig's user authenticates with instead of a token.
fn without_token(config: &Config) -> String {
    let user = &config.auth_info;
    let has = if user.exec.is_some() {
        "an exec plugin that returns no token"
    } else if user.client_certificate.is_some() || user.client_certificate_data.is_some() {
        "a client certificate"
    } else if user.username.is_some() {
        "a username and password"
    } else {
        "no credential"
    };
    format!(
        "the kubeconfig's user has {has}: use a context whose user has a token, a tokenFile or an exec plugin that returns a token"
    )
}

#[cfg(test)]
mod tests {
    use kube::config::{KubeConfigOptions, Kubeconfig};

    use super::*;

    async fn config(user: &str) -> Config {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
        );
        let kubeconfig = Kubeconfig::from_yaml(&text).unwrap();
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_token_a_token_file_or_an_exec_plugin_gives_the_bearer() {
        assert_eq!(
            bearer(&config("    token: carol-token").await)
                .await
                .unwrap(),
            "Bearer carol-token"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file").unwrap();
        let user = format!("    tokenFile: {}", file.display());
        assert_eq!(
            bearer(&config(&user).await).await.unwrap(),
            "Bearer from-file"
        );
        let exec = r#"    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'"]
      interactiveMode: Never"#;
        assert_eq!(
            bearer(&config(exec).await).await.unwrap(),
            "Bearer from-exec"
        );
    }

    #[tokio::test]
    async fn other_credentials_are_refused_saying_what_to_use() {
        let basic = config("    username: carol\n    password: secret").await;
        assert_eq!(
            bearer(&basic).await.unwrap_err().to_string(),
            "ApprovalEvents needs a bearer token; the kubeconfig's user has a username and password: use a context whose user has a token, a tokenFile or an exec plugin that returns a token"
        );
        let nothing = config("    {}").await;
        assert!(
            bearer(&nothing)
                .await
                .unwrap_err()
                .to_string()
                .contains("the kubeconfig's user has no credential:")
        );
    }
}
