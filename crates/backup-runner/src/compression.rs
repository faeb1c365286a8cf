//! How archives are compressed. pg_dump writes its custom format
//! uncompressed (`--compress=0`) and backup-runner compresses the stream
//! with zstd on its way to the store: pg_dump's own zlib runs in one thread
//! and was the limit of a final backup, zstd is several times faster for an
//! archive of the same size, and it runs beside pg_dump on another core.
//! Archives written before (`none`: pg_dump compressed inside the format)
//! are fed to pg_restore as they are.

use std::io::Write;
use std::pin::Pin;

use async_compression::tokio::write::ZstdDecoder;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use crate::transfer::{Buffers, Lent};

/// The compression of a stored archive, as its manifest records it. A
/// value this build does not know fails to parse, so such an archive is
/// never restored by guesswork.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// The stored bytes are pg_restore's input (pg_dump compressed inside
    /// its format): archives of manifest version 1.
    #[default]
    None,
    /// A zstd frame around the uncompressed custom format.
    Zstd,
}

/// zstd's level: its default, as the `zstd` command's.
const LEVEL: i32 = 3;
/// Bytes each zstd worker compresses at a time. zstd's own choice at
/// level 3 is 8 MiB, held in and out per worker; 2 MiB keeps memory flat
/// for the same CPU and ratio (the `zstd` command with `-B2MiB`).
const JOB_SIZE: u32 = 2 * 1024 * 1024;
/// The buffer between a stream and its (de)compressor: tokio's default of
/// 8 KiB made every 8 KiB of a restore a round trip to a blocking thread
/// for the file write, and every pipe read of a dump a wake-up.
pub const STREAM_BUFFER: usize = 1024 * 1024;
/// Compressed bytes handed to the upload at a time: each is one wake-up of
/// the uploading task.
const COMPRESSED_CHUNK: usize = 256 * 1024;
/// Compressed chunks waiting for the upload to take them.
const CHUNKS_AHEAD: usize = 2;
/// Compressed chunks lent at once: those waiting, one filling, and one
/// the upload reads from.
const CHUNKS_LENT: usize = CHUNKS_AHEAD + 2;

/// `reader` compressed with zstd (level 3, frame checksum) by `workers` of
/// zstd's worker threads, fed by a blocking thread of its own that reads
/// it. async-compression's encoder, polled on the async runtime, spent a
/// third of its CPU time in zstd's worker handshake (locking and polling
/// for a free job) when one worker was busy, time pg_dump and PostgreSQL
/// needed on two cores; a blocking thread waits for its worker instead.
///
/// The same thread decompresses what was written, whole, as it goes: the
/// stream ends with an error unless the frame decompresses to its end and
/// passes its checksum. So the bytes uploaded are known to decompress
/// without a second pass; verification proves that the stored bytes are
/// those (their sha256). A read or compression error ends the stream with
/// that error; dropping the stream stops the thread.
pub fn compress<R>(reader: R, workers: u32) -> impl AsyncRead + Send + Unpin
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let (sender, receiver) = tokio::sync::mpsc::channel(CHUNKS_AHEAD);
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let compressed = compress_into(&runtime, reader, workers, sender.clone());
        if let Err(e) = compressed {
            // Nobody to tell when the stream was dropped.
            let _ = sender.blocking_send(Err(e));
        }
    });
    tokio_util::io::StreamReader::new(tokio_stream::wrappers::ReceiverStream::new(receiver))
}

/// Reads `reader` to its end (waiting on the runtime for each read) and
/// compresses it into chunks for `sender`, checked as they go.
fn compress_into<R: AsyncRead + Unpin>(
    runtime: &tokio::runtime::Handle,
    mut reader: R,
    workers: u32,
    sender: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
) -> std::io::Result<()> {
    let buffers = Buffers::new(CHUNKS_LENT);
    let chunks = Chunks {
        sender,
        filling: buffers.lend(COMPRESSED_CHUNK),
        buffers,
        check: zstd::stream::write::Decoder::new(std::io::sink())?,
    };
    let mut encoder = encoder(chunks, workers)?;
    let mut buffer = vec![0u8; STREAM_BUFFER];
    loop {
        let read = runtime.block_on(reader.read(&mut buffer))?;
        if read == 0 {
            break;
        }
        encoder.write_all(&buffer[..read])?;
    }
    encoder.finish()?.finish()
}

/// Where the compressor writes: chunks of [`COMPRESSED_CHUNK`] bytes, each
/// decompressed (`check`), then sent to the stream's reader (waiting while
/// it holds [`CHUNKS_AHEAD`]). Chunks are reused once read: allocated one
/// by one, each was a new mapping, 28,000 page faults for a 111 MiB
/// archive (docs/backups.md, memory).
struct Chunks {
    sender: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buffers: Buffers,
    filling: Lent,
    check: zstd::stream::write::Decoder<'static, std::io::Sink>,
}

impl Chunks {
    fn send(&mut self) -> std::io::Result<()> {
        let full = std::mem::replace(&mut self.filling, self.buffers.lend(COMPRESSED_CHUNK));
        self.check
            .write_all(full.as_ref())
            .map_err(does_not_decompress)?;
        self.sender
            .blocking_send(Ok(Bytes::from_owner(full)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the upload ended"))
    }

    /// Sends the last chunk once the frame decompressed to its end.
    fn finish(self) -> std::io::Result<()> {
        let Self {
            sender,
            filling: last,
            mut check,
            ..
        } = self;
        check
            .write_all(last.as_ref())
            .map_err(does_not_decompress)?;
        // An incomplete frame or a wrong checksum fails here.
        check.finish().map_err(does_not_decompress)?;
        sender
            .blocking_send(Ok(Bytes::from_owner(last)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the upload ended"))
    }
}

fn does_not_decompress(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("the archive zstd wrote does not decompress: {e}"),
    )
}

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let taken = self.filling.fill_from(buf);
        if self.filling.filled() == COMPRESSED_CHUNK {
            self.send()?;
        }
        Ok(taken)
    }

    /// Chunks go when full, and the last one at [`Chunks::finish`].
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A zstd encoder into `writer` at zstd's level 3 with its frame checksum,
/// compressing on `workers` (at least one) of zstd's worker threads, in
/// jobs of [`JOB_SIZE`]: [`compress`]'s, and for the files of a parallel
/// dump, one worker each. Without a worker zstd compresses in the calling
/// thread through a window that wraps around its input buffer every
/// 2 MiB, and matches across the wrap on its slower path
/// (`ZSTD_compressBlock_doubleFast_extDict_generic`, half of
/// backup-runner's samples in a one-job dump): 1.5 times the CPU of one
/// worker, whose jobs see their window in one piece. The `zstd` command
/// uses one worker too (`-T1`: 4.3 s of CPU for 440 MiB, against 6.5 s
/// with `--single-thread`).
pub fn encoder<W: std::io::Write>(
    writer: W,
    workers: u32,
) -> std::io::Result<zstd::stream::write::Encoder<'static, W>> {
    let mut encoder = zstd::stream::write::Encoder::new(writer, LEVEL)?;
    encoder.include_checksum(true)?;
    encoder.multithread(workers.max(1))?;
    encoder.set_parameter(zstd::stream::raw::CParameter::JobSize(JOB_SIZE))?;
    Ok(encoder)
}

/// `sink` fed the stored bytes of an archive: decompressed on the way
/// when the archive is compressed, so that it receives pg_restore's input.
pub fn decompressing<W>(sink: W, compression: Compression) -> Pin<Box<dyn AsyncWrite + Send>>
where
    W: AsyncWrite + Send + 'static,
{
    match compression {
        Compression::None => Box::pin(sink),
        Compression::Zstd => Box::pin(ZstdDecoder::new(sink)),
    }
}

/// The default number of zstd workers: one per core beyond the first,
/// which pg_dump (or pg_restore) keeps busy; at least one.
pub fn default_workers() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores.saturating_sub(1).clamp(1, 8)).expect("at most 8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn round_trip(workers: u32) {
        let data: Vec<u8> = (0..5_000_000u32)
            .flat_map(|i| (i % 1000).to_le_bytes())
            .collect();
        let mut compressed = Vec::new();
        compress(std::io::Cursor::new(data.clone()), workers)
            .read_to_end(&mut compressed)
            .await
            .unwrap();
        assert!(compressed.len() < data.len() / 4, "{}", compressed.len());
        assert_eq!(&compressed[..4], [0x28, 0xb5, 0x2f, 0xfd], "zstd's magic");

        assert!(restored(&compressed).await == data, "the same bytes back");
    }

    /// What a restore reads of `compressed`, through [`decompressing`].
    async fn restored(compressed: &[u8]) -> Vec<u8> {
        let (writer, mut reader) = tokio::io::duplex(64 * 1024);
        let reading = tokio::spawn(async move {
            let mut out = Vec::new();
            reader.read_to_end(&mut out).await.unwrap();
            out
        });
        let mut sink = decompressing(writer, Compression::Zstd);
        sink.write_all(compressed).await.unwrap();
        sink.shutdown().await.unwrap();
        drop(sink);
        reading.await.unwrap()
    }

    #[tokio::test]
    async fn zstd_round_trips_on_its_thread_and_on_workers() {
        round_trip(1).await;
        round_trip(2).await;
    }

    #[tokio::test]
    async fn incompressible_bytes_cross_many_reused_chunks_intact() {
        // xorshift: bytes zstd cannot shrink, so the frame spans about
        // twelve chunks, more than are ever lent at once.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let data: Vec<u8> = (0..3 * 1024 * 1024)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let mut compressed = Vec::new();
        compress(std::io::Cursor::new(data.clone()), 1)
            .read_to_end(&mut compressed)
            .await
            .unwrap();
        assert!(compressed.len() > CHUNKS_LENT * COMPRESSED_CHUNK);
        assert!(restored(&compressed).await == data, "the same bytes back");
    }

    #[tokio::test]
    async fn the_blocking_encoder_writes_frames_the_decoder_reads() {
        use std::io::Write;
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        let mut encoder = encoder(Vec::new(), 1).unwrap();
        encoder.write_all(&data).unwrap();
        let compressed = encoder.finish().unwrap();
        assert!(compressed.len() < data.len() / 4);
        assert!(restored(&compressed).await == data, "what restores read");
    }

    #[tokio::test]
    async fn an_altered_frame_fails_to_decompress() {
        let data = vec![7u8; 1_000_000];
        let mut compressed = Vec::new();
        compress(std::io::Cursor::new(data), 1)
            .read_to_end(&mut compressed)
            .await
            .unwrap();
        let last = compressed.len() - 2;
        compressed[last] ^= 0xff;
        let mut sink = decompressing(tokio::io::sink(), Compression::Zstd);
        let written = async {
            sink.write_all(&compressed).await?;
            sink.shutdown().await
        };
        assert!(written.await.is_err(), "the frame's checksum catches it");
    }

    #[test]
    fn manifests_spell_compression_in_lowercase_and_default_to_none() {
        assert_eq!(
            serde_json::to_string(&Compression::Zstd).unwrap(),
            "\"zstd\""
        );
        assert_eq!(Compression::default(), Compression::None);
        assert!(serde_json::from_str::<Compression>("\"lz4\"").is_err());
        assert!((1..=8).contains(&default_workers()));
    }
}
