//! `GET /v1/openapi.json`: the API's contract as an OpenAPI 3.1 document (kept beside the
//! routes; a test checks that every route is in it).

pub const DOCUMENT: &str = include_str!("openapi.json");
