//! QEMU's stream framing (`-netdev stream` and `-netdev socket`): each
//! Ethernet frame is preceded by its length as a 4-byte big-endian number.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame a port takes (a jumbo frame plus headers); a longer
/// length means a broken or hostile peer, and the connection is closed.
pub const MAX_FRAME: usize = 65_550;

/// Reads one frame into `buf`; `Ok(false)` at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {n} bytes is longer than {MAX_FRAME}")));
    }
    buf.resize(n, 0);
    r.read_exact(buf).await?;
    Ok(true)
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(4 + frame.len());
    out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    out.extend_from_slice(frame);
    w.write_all(&out).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_ones_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(1 << 20);
        write_frame(&mut a, b"one").await.unwrap();
        write_frame(&mut a, &[7u8; 1500]).await.unwrap();
        let mut buf = Vec::new();
        assert!(read_frame(&mut b, &mut buf).await.unwrap());
        assert_eq!(buf, b"one");
        assert!(read_frame(&mut b, &mut buf).await.unwrap());
        assert_eq!(buf.len(), 1500);
        a.write_all(&(u32::MAX).to_be_bytes()).await.unwrap();
        assert_eq!(read_frame(&mut b, &mut buf).await.unwrap_err().kind(), io::ErrorKind::InvalidData);
        drop(a);
        let (c, mut d) = tokio::io::duplex(64);
        drop(c);
        assert!(!read_frame(&mut d, &mut buf).await.unwrap(), "a clean end");
    }
}
