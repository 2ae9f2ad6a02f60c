//! The switch's own runtime (see [`crate::segment`]): every segment's
//! ports, gateways and NATs run on it.

use std::sync::OnceLock;

/// The switch's own runtime: one thread, started on first use, that
/// serves every segment's ports.
pub(crate) fn runtime() -> &'static tokio::runtime::Handle {
    static RUNTIME: OnceLock<tokio::runtime::Handle> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("the switch's runtime cannot start");
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("vmaas-switch".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("the switch's thread cannot start");
        handle
    })
}
