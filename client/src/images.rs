//! Uploading an image's file.

use reqwest::Method;
use vmaas_model::image::Image;
use vmaas_model::{Envelope, Page};

use crate::{Client, Error, PREFIX};

impl Client {
    /// Uploads the file of image `id` (created without a source) from the
    /// chunks of `body`, streamed; the image as the server checked it.
    pub async fn upload_image<S>(&self, id: &str, body: S) -> Result<Image, Error>
    where
        S: futures::TryStream<Ok = Vec<u8>, Error = std::io::Error> + Send + 'static,
    {
        let body = reqwest::Body::wrap_stream(body);
        let url = format!("{}{}/images/{id}/content", self.endpoint, PREFIX);
        let mut req = self.http.request(Method::PUT, &url).header(reqwest::header::CONTENT_TYPE, "application/octet-stream").body(body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let (_, bytes) = self.exchange(req).await?;
        serde_json::from_slice::<Envelope<Image>>(&bytes).map(|e| e.object).map_err(|e| Error::Decode(format!("upload: {e}")))
    }

    /// Prunes the caller's imported images nothing uses (unused for at
    /// least `unused_for`, e.g. `1h`); with `dry_run`, only lists them.
    pub async fn prune_images(&self, dry_run: bool, unused_for: Option<&str>) -> Result<Page<Image>, Error> {
        let mut path = format!("/images:prune?dry_run={dry_run}");
        if let Some(d) = unused_for {
            path.push_str(&format!("&unused_for={}", d.replace(' ', "")));
        }
        self.call::<(), Page<Image>>(Method::POST, &path, None, None).await?.ok_or_else(|| Error::Decode("empty prune answer".into()))
    }
}
