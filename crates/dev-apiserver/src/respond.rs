//! Responses: JSON and text bodies, errors as their Status bodies, objects
//! in the encoding the client prefers, and Tables.

use std::convert::Infallible;

use http::{Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;

use crate::request::Req;
use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::{gofmt, protobuf, table};

pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

pub fn json(status: StatusCode, value: &Value) -> Response<Body> {
    json_as(status, value, "application/json")
}

pub fn json_as(status: StatusCode, value: &Value, content_type: &str) -> Response<Body> {
    let body = gofmt::object_json(value);
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full("")))
}

pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full("")))
}

pub fn error(e: &ApiError) -> Response<Body> {
    json(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.body,
    )
}

/// Answers JSON, or protobuf when the client prefers it and the kind has a
/// protobuf form.
pub fn respond(req: &Req, status: StatusCode, object: &Value) -> Response<Body> {
    let accept = req.header(header::ACCEPT);
    let prefers_protobuf = accept
        .split(',')
        .next()
        .is_some_and(|first| first.trim().starts_with(protobuf::CONTENT_TYPE));
    let supported = protobuf::supports(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    );
    if prefers_protobuf
        && supported
        && let Ok(bytes) = protobuf::encode(object)
    {
        return Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, protobuf::CONTENT_TYPE)
            .body(full(bytes))
            .unwrap_or_else(|_| Response::new(full("")));
    }
    json(status, object)
}

pub fn table_response(
    rt: &ResourceType,
    objects: &[Value],
    req: &Req,
    list_meta: Value,
) -> Response<Body> {
    let include = include_object(req);
    let table = table::table(
        &printer(rt),
        objects,
        include,
        list_meta,
        jiff::Timestamp::now(),
    );
    json_as(
        StatusCode::OK,
        &table,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
}

/// `includeObject` of a Table request (Metadata by default).
pub fn include_object(req: &Req) -> &str {
    req.param("includeObject").unwrap_or("Metadata")
}

/// How rows of this type are printed.
pub fn printer(rt: &ResourceType) -> table::TableKind {
    rt.table
        .clone()
        .unwrap_or_else(|| table::TableKind::builtin(&rt.group, &rt.plural))
}
