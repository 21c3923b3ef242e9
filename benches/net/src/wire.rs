//! KV Connect spoken with hyper's connection-level client, so that every connection is one
//! the program opened on purpose: the metadata exchange, point reads, set commits and
//! check+set commits over HTTP/1.1 or HTTP/2, as the hostile check and the load generator
//! speak it.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use stampkv_kvconnect as proto;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;

/// Request bodies.
pub type Body = Full<Bytes>;

/// Where the server is, its access token and the database id its metadata exchange handed
/// out (empty before it).
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's address.
    pub addr: SocketAddr,
    /// The access token sent as `Authorization: Bearer`.
    pub token: String,
    /// The `x-denokv-database-id` of data-path requests.
    pub db_id: String,
}

/// Opens an HTTP/1.1 connection.
pub async fn connect_h1(addr: SocketAddr) -> Result<http1::SendRequest<Body>, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) =
        http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("http1 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Opens an HTTP/2 connection with prior knowledge (as Deno's client does).
pub async fn connect_h2(addr: SocketAddr) -> Result<http2::SendRequest<Body>, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .map_err(|e| format!("http2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Opens an HTTP/2 connection with prior knowledge on the `h2` crate itself, so that a
/// request's HEADERS and DATA frames leave in one write, as Deno's client sends them (hyper's
/// client sends the DATA frame in a segment of its own, and the server then answers each
/// request with an extra bare ACK).
pub async fn connect_h2_one_write(addr: SocketAddr) -> Result<h2::client::SendRequest<Bytes>, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) =
        h2::client::handshake(stream).await.map_err(|e| format!("http2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// A connection of either version.
pub enum Conn {
    /// HTTP/1.1: one request at a time.
    H1(http1::SendRequest<Body>),
    /// HTTP/2 with prior knowledge.
    H2(http2::SendRequest<Body>),
    /// HTTP/2 with prior knowledge, each request in one write ([`connect_h2_one_write`]);
    /// only [`Conn::call`] (whole answers).
    H2OneWrite(h2::client::SendRequest<Bytes>),
}

impl Conn {
    /// Whether the connection is gone (as far as the client knows).
    pub fn is_closed(&self) -> bool {
        match self {
            Conn::H1(s) => s.is_closed(),
            Conn::H2(s) => s.is_closed(),
            // `h2` tells only when the next request is sent.
            Conn::H2OneWrite(_) => false,
        }
    }

    /// Sends `path` with `body` (`version`: the `x-denokv-version` header; 0 for the
    /// metadata exchange) and returns the answer's head.
    pub async fn send(
        &mut self,
        target: &Target,
        path: &str,
        version: u8,
        body: Vec<u8>,
    ) -> Result<Response<Incoming>, String> {
        let h2 = !matches!(self, Conn::H1(_));
        let request = build(target, path, version, body, h2)?;
        match self {
            Conn::H1(s) => {
                s.ready().await.map_err(|e| format!("connection not ready: {e}"))?;
                s.send_request(request).await.map_err(|e| format!("request failed: {e}"))
            }
            Conn::H2(s) => {
                s.ready().await.map_err(|e| format!("connection not ready: {e}"))?;
                s.send_request(request).await.map_err(|e| format!("request failed: {e}"))
            }
            Conn::H2OneWrite(_) => Err("a one-write HTTP/2 connection answers whole (Conn::call)".to_owned()),
        }
    }

    /// [`Conn::send`] and reads the whole answer.
    pub async fn call(
        &mut self,
        target: &Target,
        path: &str,
        version: u8,
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes), String> {
        if let Conn::H2OneWrite(sender) = self {
            return call_one_write(sender, target, path, version, body).await;
        }
        let response = self.send(target, path, version, body).await?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| format!("reading the answer: {e}"))?;
        Ok((status, body.to_bytes()))
    }
}

/// [`Conn::call`] on the `h2` crate: the request's HEADERS and DATA frames are queued before
/// the connection task writes either, so they leave in one write.
async fn call_one_write(
    sender: &h2::client::SendRequest<Bytes>,
    target: &Target,
    path: &str,
    version: u8,
    body: Vec<u8>,
) -> Result<(StatusCode, Bytes), String> {
    let (head, body) = build(target, path, version, body, true)?.into_parts();
    let mut ready = sender.clone().ready().await.map_err(|e| format!("connection not ready: {e}"))?;
    let (response, mut send) = ready
        .send_request(Request::from_parts(head, ()), false)
        .map_err(|e| format!("request failed: {e}"))?;
    let data = body.collect().await.map_err(|e| format!("request body: {e}"))?.to_bytes();
    send.send_data(data, true).map_err(|e| format!("request body: {e}"))?;
    let response = response.await.map_err(|e| format!("request failed: {e}"))?;
    let status = response.status();
    let mut answer = response.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = answer.data().await {
        let chunk = chunk.map_err(|e| format!("reading the answer: {e}"))?;
        let _ = answer.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    Ok((status, Bytes::from(out)))
}

/// A POST request; HTTP/2 needs the absolute URI, HTTP/1.1 the path and a host header.
fn build(target: &Target, path: &str, version: u8, body: Vec<u8>, h2: bool) -> Result<Request<Body>, String> {
    let uri = if h2 { format!("http://{}{path}", target.addr) } else { path.to_owned() };
    let mut request = Request::post(uri).header(AUTHORIZATION, format!("Bearer {}", target.token));
    if !h2 {
        request = request.header(HOST, target.addr.to_string());
    }
    if version == 0 {
        request = request.header(CONTENT_TYPE, "application/json");
    } else {
        request = request
            .header(CONTENT_TYPE, "application/x-protobuf")
            .header("x-denokv-version", version.to_string())
            .header("x-denokv-database-id", target.db_id.as_str());
    }
    request.body(Full::new(Bytes::from(body))).map_err(|e| format!("cannot build the request: {e}"))
}

/// The metadata exchange: returns the database id.
pub async fn metadata(conn: &mut Conn, target: &Target) -> Result<String, String> {
    let (status, body) = conn.call(target, "/", 0, br#"{"supportedVersions":[2,3]}"#.to_vec()).await?;
    let text = String::from_utf8_lossy(&body);
    if status != StatusCode::OK {
        return Err(format!("metadata exchange: status {status}: {text}"));
    }
    let id = text
        .split("\"databaseId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or_else(|| format!("no databaseId in {text}"))?;
    Ok(id.to_owned())
}

/// A key of string parts in the tuple encoding of Deno KV.
pub fn key(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.push(0x02);
        for &b in part.as_bytes() {
            out.push(b);
            if b == 0 {
                out.push(0xff);
            }
        }
        out.push(0x00);
    }
    out
}

/// `kv.get(key)`.
pub fn get_body(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    end.push(0);
    proto::SnapshotRead {
        ranges: vec![proto::ReadRange { start: key.to_vec(), end, limit: 1, reverse: false }],
    }
    .encode_to_vec()
}

/// A `set` of `key` to `value` as a `Uint8Array`.
fn set_mutation(key: &[u8], value: &[u8]) -> proto::Mutation {
    proto::Mutation {
        key: key.to_vec(),
        value: Some(proto::KvValue { data: value.to_vec(), encoding: proto::VE_BYTES }),
        mutation_type: proto::M_SET,
        ..Default::default()
    }
}

/// `kv.set(key, bytes)` for several keys in one commit.
pub fn set_body(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mutations = entries.iter().map(|(k, v)| set_mutation(k, v)).collect();
    proto::AtomicWrite { mutations, ..Default::default() }.encode_to_vec()
}

/// `kv.atomic().check({ key, versionstamp: null }).set(key, bytes)`: a commit that succeeds
/// only while `key` does not exist.
pub fn check_set_body(key: &[u8], value: &[u8]) -> Vec<u8> {
    proto::AtomicWrite {
        checks: vec![proto::Check { key: key.to_vec(), versionstamp: Vec::new() }],
        mutations: vec![set_mutation(key, value)],
        ..Default::default()
    }
    .encode_to_vec()
}

/// Reads one key: its value, if any.
pub async fn get(conn: &mut Conn, target: &Target, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let (status, body) = conn.call(target, "/v2/snapshot_read", 2, get_body(key)).await?;
    if status != StatusCode::OK {
        return Err(format!("snapshot_read: status {status}: {}", String::from_utf8_lossy(&body)));
    }
    let out = proto::SnapshotReadOutput::decode(body).map_err(|e| format!("snapshot_read answer: {e}"))?;
    Ok(out.ranges.into_iter().next().and_then(|r| r.values.into_iter().next()).map(|e| e.value))
}

/// Commits sets of `entries`.
pub async fn set(conn: &mut Conn, target: &Target, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
    commit(conn, target, set_body(entries)).await
}

/// Sends an encoded `AtomicWrite`; `Ok` only if it was applied.
pub async fn commit(conn: &mut Conn, target: &Target, body: Vec<u8>) -> Result<(), String> {
    let (status, body) = conn.call(target, "/v2/atomic_write", 2, body).await?;
    if status != StatusCode::OK {
        return Err(format!("atomic_write: status {status}: {}", String::from_utf8_lossy(&body)));
    }
    let out = proto::AtomicWriteOutput::decode(body).map_err(|e| format!("atomic_write answer: {e}"))?;
    if out.status == proto::AW_SUCCESS {
        Ok(())
    } else {
        Err(format!("atomic_write status {}", out.status))
    }
}

/// Latencies sorted, and quantiles of them.
pub fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted.get(i).copied()
}
