//! The web page at `/`: static files built into the binary (the page's own
//! HTML, CSS and JavaScript from `web/src`, and xterm.js and noVNC's
//! modules from the npm packages `web/package-lock.json` pins), served
//! with a strict Content Security Policy. Everything it shows comes from the API with the
//! signed-in user's token.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Scripts, styles, images and connections from this server only
/// (xterm.js sets inline styles on the terminal's elements).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../../web/src/index.html");

/// The files under `/assets`: name, content type, bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("../../web/src/app.js")),
    ("app.css", "text/css; charset=utf-8", include_bytes!("../../web/src/app.css")),
    ("xterm.js", "text/javascript; charset=utf-8", include_bytes!(concat!(env!("OUT_DIR"), "/web/xterm.js"))),
    ("xterm.css", "text/css; charset=utf-8", include_bytes!(concat!(env!("OUT_DIR"), "/web/xterm.css"))),
    ("addon-fit.js", "text/javascript; charset=utf-8", include_bytes!(concat!(env!("OUT_DIR"), "/web/addon-fit.js"))),
];

include!(concat!(env!("OUT_DIR"), "/novnc.rs"));

/// The page's routes (no token needed: the page signs in through the API).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new().route("/", get(index)).route("/assets/{file}", get(asset)).route("/assets/novnc/{*path}", get(novnc))
}

/// A module of noVNC's, by its path under the package (`core/rfb.js`).
async fn novnc(Path(path): Path<String>) -> Response {
    match NOVNC_FILES.iter().find(|(name, _)| *name == path) {
        Some((_, bytes)) => served("text/javascript; charset=utf-8", bytes),
        None => missing(format!("no noVNC module {path:?}")),
    }
}

/// A built-in file of content type `kind`.
fn served(kind: &'static str, bytes: &'static [u8]) -> Response {
    hardened(([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], bytes).into_response())
}

/// 404 for a file the page does not have.
fn missing(message: String) -> Response {
    crate::error::ApiError::new(StatusCode::NOT_FOUND, crate::error::Code::NotFound, message).into_response()
}

/// Headers every answer of the page carries.
fn hardened(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

async fn index() -> Response {
    served("text/html; charset=utf-8", INDEX.as_bytes())
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, bytes)) => served(kind, bytes),
        None => missing(format!("no asset {file:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_assets_it_serves() {
        for src in INDEX.split("/assets/").skip(1).map(|r| r.split('"').next().unwrap_or_default()) {
            assert!(ASSETS.iter().any(|(n, _, _)| *n == src), "index.html names /assets/{src}, which is not built in");
        }
        assert!(ASSETS.iter().all(|(_, _, b)| !b.is_empty()));
    }

    #[test]
    fn novncs_modules_are_all_there_for_its_imports() {
        let rfb = NOVNC_FILES.iter().find(|(n, _)| *n == "core/rfb.js").expect("core/rfb.js");
        let text = String::from_utf8_lossy(rfb.1);
        for import in text.lines().filter_map(|l| l.trim().strip_prefix("import ")).filter_map(|l| l.split(['\'', '"']).nth(1)) {
            let path = std::path::Path::new("core").join(import);
            let mut parts: Vec<String> = Vec::new();
            for c in path.components() {
                match c {
                    std::path::Component::ParentDir => {
                        parts.pop();
                    }
                    std::path::Component::CurDir => {}
                    c => parts.push(c.as_os_str().to_string_lossy().into_owned()),
                }
            }
            let wanted = parts.join("/");
            assert!(NOVNC_FILES.iter().any(|(n, _)| *n == wanted), "core/rfb.js imports {import}: {wanted} is not built in");
        }
    }
}
