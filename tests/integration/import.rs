//! `bulkhead import openapi` and `bulkhead import toolbox` on real documents (the Swagger
//! Petstore 3, Redocly's museum API, Redoc's 3.1 demo, a Toolbox `tools.yaml` of its docs'
//! examples), in a project made by `bulkhead init`: what is written, what `check` then says, a
//! document that cannot be imported (diagnostics at its paths, nothing written), and importing
//! again after the document changed (a diff that keeps every decision).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
}

fn bulkhead(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("bulkhead runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A new project (`bulkhead init`), its folder.
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["init", "shop"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let root = dir.path().join("shop");
    (dir, root)
}

/// Every file under `root/specs`, with its text.
fn specs(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in walk(&root.join("specs")) {
        let t = std::fs::read_to_string(&entry).unwrap_or_default();
        out.push((entry, t));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Deletes every `undecided:` line: a person confirming each proposal as written.
fn decide(path: &Path) {
    let t = std::fs::read_to_string(path).unwrap();
    let kept: String = t
        .lines()
        .filter(|l| !l.trim_start().starts_with("undecided:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(path, kept).unwrap();
}

#[test]
fn the_petstore_imports_as_undecided_tools_that_check_refuses_until_decided() {
    let (_d, root) = project();
    let pet = fixture("petstore3.yaml");
    let pet = pet.to_str().unwrap();
    // Two operations have no spec form: an error at each one's path, and nothing is written.
    let before = specs(&root);
    let out = bulkhead(&root, &["import", "openapi", pet, "--server", "petstore"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("error: paths./pet/{petId}/uploadImage.post.requestBody.content: a request body of [\"application/octet-stream\"]"),
        "{said}"
    );
    assert!(
        said.contains(
            "error: paths./user/createWithList.post.requestBody.content.application/json.schema:"
        ),
        "{said}"
    );
    assert!(said.contains("nothing written"), "{said}");
    assert_eq!(specs(&root), before, "nothing was written");

    // The rest, the two listed with their reasons.
    let out = bulkhead(
        &root,
        &[
            "import",
            "openapi",
            pet,
            "--server",
            "petstore",
            "--skip-unsupported",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert_eq!(
        said.matches("\nadded: petstore.").count()
            + usize::from(said.starts_with("added: petstore.")),
        17,
        "{said}"
    );
    assert!(
        said.contains("not imported: paths./pet/{petId}/uploadImage.post"),
        "{said}"
    );
    let connector = std::fs::read_to_string(root.join("specs/connectors/petstore.yaml")).unwrap();
    // The base URL behind a variable, the API key from a secret, never a value.
    assert!(
        connector.contains(r#"base_url: "${PETSTORE_URL:-https://petstore3.swagger.io/api/v3}""#),
        "{connector}"
    );
    assert!(
        connector.contains(r#"headers: {"api_key":"${PETSTORE_API_KEY:-}"}"#),
        "{connector}"
    );
    assert!(
        connector.contains(r#"secrets: ["PETSTORE_API_KEY"]"#),
        "{connector}"
    );
    // Path parameters renamed in the template, the document's names kept where they are sent.
    assert!(
        connector.contains(r#"path: "/pet/{pet_id}""#),
        "{connector}"
    );
    assert!(
        connector.contains(r#"upstream: "photoUrls""#),
        "{connector}"
    );
    assert!(
        connector.contains(r#"values: ["available","pending","sold"]"#),
        "{connector}"
    );
    // The success response's object schema, as JSON Schema (a list answer declares none).
    assert!(
        connector.contains(r#"result_schema: {"#)
            && connector.contains(r#""required":["name","photoUrls"]"#),
        "{connector}"
    );
    // deletePet's `api_key` header parameter.
    assert!(connector.contains(r#"headers: ["api_key"]"#), "{connector}");
    let server = std::fs::read_to_string(root.join("specs/servers/petstore.yaml")).unwrap();
    // Proposals with their reasons: a DELETE asks for approval; a response with email and
    // password is proposed confidential.
    let block = |tool: &str| -> String {
        let start = server
            .find(&format!("  {tool}:\n"))
            .unwrap_or_else(|| panic!("{tool} in {server}"));
        server[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("    "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let delete = block("delete_pet");
    assert!(
        delete.contains(r#"approval: "always""#) && delete.contains("DELETE changes data"),
        "{delete}"
    );
    let user = block("get_user_by_name");
    assert!(
        user.contains(r#"sensitivity: "confidential""#) && user.contains("email"),
        "{user}"
    );
    assert!(block("get_pet_by_id").contains(r#"permission: "connect""#));

    // `check` refuses each undecided tool, naming the proposal; once decided, it passes.
    let out = bulkhead(&root, &["check"]);
    assert!(!out.status.success());
    let said = text(&out);
    assert_eq!(
        said.matches("was imported and is not decided yet").count(),
        17,
        "{said}"
    );
    decide(&root.join("specs/servers/petstore.yaml"));
    let out = bulkhead(&root, &["check"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_changed_document_is_imported_again_as_a_diff_that_keeps_decisions() {
    let (_d, root) = project();
    let museum = fixture("museum.yaml");
    let out = bulkhead(
        &root,
        &[
            "import",
            "openapi",
            museum.to_str().unwrap(),
            "--server",
            "museum",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let server_file = root.join("specs/servers/museum.yaml");
    decide(&server_file);
    // A person's decisions: tickets are confidential, the event list needs no approval anyway.
    let decided = std::fs::read_to_string(&server_file).unwrap().replace(
        "    uses: \"museum.buy_museum_tickets\"",
        "    uses: \"museum.buy_museum_tickets\"\n    rate_limit: { calls: 5, per_seconds: 60 }",
    );
    let decided = decided.replacen(r#"sensitivity: "internal""#, r#"sensitivity: "secret""#, 1);
    std::fs::write(&server_file, &decided).unwrap();
    assert!(bulkhead(&root, &["check"]).status.success());

    // The document changes: one operation gets a parameter, one goes, one arrives.
    let doc = std::fs::read_to_string(&museum).unwrap();
    let head =
        "      operationId: getMuseumHours\n      tags:\n        - Operations\n      parameters:\n";
    assert!(doc.contains(head));
    let edited = doc.replacen(
        head,
        &format!("{head}        - name: lang\n          in: query\n          schema: {{ type: string, enum: [en, fr] }}\n"),
        1,
    );
    let edited = edited.replace(
        "operationId: deleteSpecialEvent",
        "operationId: cancelSpecialEvent",
    );
    let changed = root.join("museum-v2.yaml");
    std::fs::write(&changed, edited).unwrap();
    let out = bulkhead(
        &root,
        &[
            "import",
            "openapi",
            changed.to_str().unwrap(),
            "--server",
            "museum",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("added: museum.cancel_special_event"),
        "{said}"
    );
    assert!(
        said.contains("removed: museum.delete_special_event"),
        "{said}"
    );
    assert!(
        said.contains("changed: museum.get_museum_hours: its query, parameter `lang` added"),
        "{said}"
    );
    assert!(
        said.contains("unchanged: 6 operation(s), their decisions kept"),
        "{said}"
    );
    let now = std::fs::read_to_string(&server_file).unwrap();
    // Kept: the rate limit and the raised sensitivity; the changed one asked again, the new
    // one proposed, the removed one gone.
    assert!(
        now.contains("rate_limit: {\"calls\":5,\"per_seconds\":60}"),
        "{now}"
    );
    assert!(now.contains(r#"sensitivity: "secret""#), "{now}");
    assert!(
        now.contains("GET /museum-hours changed in the document"),
        "{now}"
    );
    assert!(!now.contains("delete_special_event:"), "{now}");
    let out = bulkhead(&root, &["check"]);
    let said = text(&out);
    assert_eq!(
        said.matches("was imported and is not decided yet").count(),
        2,
        "{said}"
    );
}

#[test]
fn a_broken_or_foreign_document_gets_diagnostics_at_its_paths_and_nothing_is_written() {
    let (_d, root) = project();
    let before = specs(&root);
    let bad = root.join("bad.yaml");
    // Not OpenAPI 3.0 by its structure: the parser crate names where.
    std::fs::write(&bad, "openapi: 3.0.3\ninfo: { title: x, version: '1' }\npaths:\n  /a:\n    get:\n      responses: 7\n").unwrap();
    let out = bulkhead(
        &root,
        &[
            "import",
            "openapi",
            bad.to_str().unwrap(),
            "--server",
            "bad",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out);
    assert!(
        said.contains("error: paths./a.get.responses: not OpenAPI 3.0.3"),
        "{said}"
    );
    // Swagger 2.0, a $ref to nothing, a duplicate operationId, a relative server.
    std::fs::write(&bad, "swagger: '2.0'\n").unwrap();
    let said = text(&bulkhead(
        &root,
        &[
            "import",
            "openapi",
            bad.to_str().unwrap(),
            "--server",
            "bad",
        ],
    ));
    assert!(said.contains("Swagger 2.0 is not read"), "{said}");
    std::fs::write(
        &bad,
        "openapi: 3.1.0\ninfo: { title: x, version: '1' }\nservers: [{ url: /v1 }]\npaths:\n  /a/{id}:\n    get:\n      operationId: one\n      parameters:\n        - name: id\n          in: path\n          required: true\n          schema: { $ref: '#/components/schemas/Missing' }\n      responses: { '200': { description: ok } }\n  /b:\n    get:\n      operationId: one\n      responses: { '200': { description: ok } }\n",
    )
    .unwrap();
    let said = text(&bulkhead(
        &root,
        &[
            "import",
            "openapi",
            bad.to_str().unwrap(),
            "--server",
            "bad",
        ],
    ));
    assert!(
        said.contains("error: servers[0].url: `/v1` is not an absolute URL: pass --base-url"),
        "{said}"
    );
    assert!(said.contains("error: paths./a/{id}.get.parameters[0]: `$ref: #/components/schemas/Missing` names nothing"), "{said}");
    assert!(
        said.contains(
            "error: paths./b.get: operationId `one` is also the one of paths./a/{id}.get"
        ),
        "{said}"
    );
    // A name already taken by a connector no import wrote.
    let taken = fixture("museum.yaml");
    let said = text(&bulkhead(
        &root,
        &[
            "import",
            "openapi",
            taken.to_str().unwrap(),
            "--server",
            "workspace",
        ],
    ));
    assert!(said.contains("connector `workspace` exists"), "{said}");
    assert_eq!(
        specs(&root)
            .into_iter()
            .filter(|(p, _)| !p.ends_with("bad.yaml"))
            .collect::<Vec<_>>(),
        before
    );
}

#[test]
fn a_31_document_with_oneof_and_ref_chains_imports_what_has_a_form() {
    let (_d, root) = project();
    let doc = fixture("redoc-petstore-3.1.yaml");
    let out = bulkhead(
        &root,
        &[
            "import",
            "openapi",
            doc.to_str().unwrap(),
            "--server",
            "redoc",
            "--base-url",
            "https://petstore.example.com/v2",
            "--skip-unsupported",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    // User.pet is `oneOf [Pet, Tag]`: left out of the body, said so; cookie parameters listed.
    assert!(
        said.contains("optional body field `pet` left out: `oneOf` has no parameter form"),
        "{said}"
    );
    assert!(
        said.contains("cookie parameter `cookieParam` has no spec form"),
        "{said}"
    );
    let connector = std::fs::read_to_string(root.join("specs/connectors/redoc.yaml")).unwrap();
    assert!(
        connector.contains(r#"base_url: "${REDOC_URL:-https://petstore.example.com/v2}""#),
        "{connector}"
    );
    // deletePet's `api_key` header parameter (the `Accept-Language` ones are on `/pet`, whose
    // cookie parameter leaves its operations out).
    assert!(connector.contains(r#"headers: ["api_key"]"#), "{connector}");
    decide(&root.join("specs/servers/redoc.yaml"));
    let out = bulkhead(&root, &["check"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_toolbox_file_imports_its_sql_tools_and_lists_what_it_cannot() {
    let (_d, root) = project();
    let file = fixture("toolbox-tools.yaml");
    let out = bulkhead(
        &root,
        &[
            "import",
            "toolbox",
            file.to_str().unwrap(),
            "--server",
            "travel",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    for listed in [
        "not imported: sources.my-bigquery-source.kind: source kind `bigquery` has no connector here",
        "not imported: tools.list_table.templateParameters:",
        "not imported: tools.my-get-tool.source: its source `my-http-source` is not imported",
        "not imported: tools.search_users_bq.source:",
    ] {
        assert!(said.contains(listed), "{listed}: {said}");
    }
    let pg =
        std::fs::read_to_string(root.join("specs/connectors/travel_my_pg_source.yaml")).unwrap();
    // `$1`, `$2` as named parameters; the authServices-bound one from the caller's claim.
    assert!(pg.contains(r#"sql: "SELECT * FROM flights\nWHERE airline = :airline\nAND flight_number = :flight_number\nLIMIT 10""#), "{pg}");
    assert!(pg.contains(r#"from_claim: "sub""#), "{pg}");
    assert!(
        pg.contains("${USER_NAME}:${PASSWORD}@${TRAVEL_MY_PG_SOURCE_HOST:-127.0.0.1}"),
        "{pg}"
    );
    let sqlite =
        std::fs::read_to_string(root.join("specs/connectors/travel_my_sqlite_db.yaml")).unwrap();
    assert!(
        sqlite.contains(r#"sql: "SELECT * FROM users WHERE name LIKE :name AND age >= :min_age""#),
        "{sqlite}"
    );
    let server = std::fs::read_to_string(root.join("specs/servers/travel.yaml")).unwrap();
    assert!(
        server.contains(r#"permission: "read""#) && server.contains(r#"context: "sql_query""#),
        "{server}"
    );
    let out = bulkhead(&root, &["check"]);
    assert_eq!(
        text(&out)
            .matches("was imported and is not decided yet")
            .count(),
        6,
        "{}",
        text(&out)
    );
    decide(&root.join("specs/servers/travel.yaml"));
    let out = bulkhead(&root, &["check"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// In the scaffold test's copy of this project (before its one `cargo build`): the Petstore
/// imported (what has a form) and the Toolbox file, each proposal confirmed — the travel tools
/// decided `internal`, as a person who knows that data would.
pub(super) fn import_and_decide(root: &Path, exe: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new(exe)
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out));
    };
    let pet = fixture("petstore3.yaml");
    run(&[
        "import",
        "openapi",
        pet.to_str().unwrap(),
        "--server",
        "petstore",
        "--skip-unsupported",
    ]);
    let tb = fixture("toolbox-tools.yaml");
    run(&[
        "import",
        "toolbox",
        tb.to_str().unwrap(),
        "--server",
        "travel",
    ]);
    decide(&root.join("specs/servers/petstore.yaml"));
    let travel = root.join("specs/servers/travel.yaml");
    decide(&travel);
    let t = std::fs::read_to_string(&travel).unwrap();
    std::fs::write(
        &travel,
        t.replace(
            r#"sensitivity: "confidential""#,
            r#"sensitivity: "internal""#,
        ),
    )
    .unwrap();
}

/// `serve <server>` of the built copy on a free port with `env`, once healthy: the child and
/// its MCP URL.
fn serve(
    exe: &Path,
    root: &Path,
    config: &Path,
    server: &str,
    env: &[(&str, String)],
) -> (std::process::Child, String) {
    let port = super::scaffold::free_port();
    let child = Command::new(exe)
        .args(["--config", config.to_str().unwrap(), "serve", server])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    assert!(
        super::scaffold::wait_healthy(port, std::time::Duration::from_secs(60)),
        "`serve {server}` did not start"
    );
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs `tests/interop/import_client.py` (the official Python SDK) against `url` with `plan`.
async fn python(url: &str, session: &str, plan: serde_json::Value) -> serde_json::Value {
    let py = tokio::task::spawn_blocking(super::python_sdk::venv_python)
        .await
        .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/import_client.py");
    let run = tokio::process::Command::new(py)
        .arg(script)
        .args([
            url,
            &super::harness::token("ana", session),
            &plan.to_string(),
        ])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("the client finished within 120 s")
        .unwrap();
    assert!(out.status.success(), "import client failed: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The imported servers, built: the Petstore's tools reach a stand-in of the service with the
/// published constraints enforced before anything is sent (the API key from its secret, the
/// body under the document's names, `add_pet` asking for approval); the Toolbox tools answer
/// from a real PostgreSQL and SQLite, the flight search bound to the caller's `sub`.
pub(super) async fn imported_tools_answer(root: &Path, exe: &Path, config: &Path) {
    use serde_json::json;
    // The Petstore stand-in: records each request it gets.
    let seen: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>> = Default::default();
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let record = record.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 16).await.unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            let path = parts.uri.path().to_owned();
            record.lock().unwrap().push(json!({
                "method": parts.method.as_str(),
                "path": path,
                "query": parts.uri.query(),
                "api_key": parts.headers.get("api_key").and_then(|v| v.to_str().ok()),
                "body": body,
            }));
            let answer = if path == "/api/v3/pet/findByStatus" {
                json!([{"id": 1, "name": "Rex", "photoUrls": [], "status": "sold"}])
            } else if path == "/api/v3/pet/13" {
                // Not what the document promises (no `name`, no `photoUrls`).
                json!({"id": 13})
            } else if let Some(id) = path.strip_prefix("/api/v3/pet/") {
                json!({"id": id.parse::<i64>().unwrap_or(0), "name": "Rex", "photoUrls": [], "status": "available"})
            } else {
                // The pet as stored: what was sent, with its new id.
                let mut pet = body.clone();
                pet["id"] = json!(10);
                pet
            };
            axum::Json(answer)
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v3", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (mut child, url) = serve(
        exe,
        root,
        config,
        "petstore",
        &[
            ("PETSTORE_URL", base),
            ("PETSTORE_REACH_PRIVATE", "127.0.0.0/8".into()),
            ("PETSTORE_API_KEY", "key-123".into()),
        ],
    );
    let got = python(
        &url,
        "pets",
        json!([
            {"tool": "get_pet_by_id", "args": {"pet_id": 7}},
            {"tool": "get_pet_by_id", "args": {"pet_id": "seven"}},
            {"tool": "get_pet_by_id", "args": {"pet_id": 13}},
            {"tool": "find_pets_by_status", "args": {"status": "lost"}},
            {"tool": "find_pets_by_status", "args": {"status": "sold"}},
            {"tool": "add_pet", "args": {"name": "Rex", "photo_urls": ["https://img.example/rex.png"], "status": "available"}},
        ]),
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let calls = got["calls"].as_array().unwrap();
    let err = |i: usize| calls[i]["error"].as_bool().unwrap();
    let said = |i: usize| calls[i]["text"].as_str().unwrap().to_owned();
    assert_eq!(
        got["tools"]["find_pets_by_status"]["properties"]["status"]["enum"],
        json!(["available", "pending", "sold"]),
        "{got}"
    );
    // The response schema of the document is the tool's outputSchema.
    assert_eq!(
        got["outputs"]["get_pet_by_id"]["required"],
        json!(["name", "photoUrls"]),
        "{got}"
    );
    assert!(
        got["outputs"].get("find_pets_by_status").is_none(),
        "a list is no output schema: {got}"
    );
    assert!(!err(0) && said(0).contains("Rex"), "{got}");
    assert!(err(1) && said(1).contains("pet_id"), "{got}");
    // An answer that breaks the document's schema is not passed on.
    assert!(
        err(2) && said(2).contains("declared output schema"),
        "{got}"
    );
    assert!(err(3) && said(3).contains("status"), "{got}");
    assert!(!err(4), "{got}");
    assert!(!err(5), "{got}");
    assert!(
        calls[5]["asked"][0].as_str().unwrap().contains("add_pet"),
        "approval asked: {got}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            json!({"method": "GET", "path": "/api/v3/pet/7", "query": null, "api_key": "key-123", "body": null}),
            json!({"method": "GET", "path": "/api/v3/pet/13", "query": null, "api_key": "key-123", "body": null}),
            json!({"method": "GET", "path": "/api/v3/pet/findByStatus", "query": "status=sold", "api_key": "key-123", "body": null}),
            json!({"method": "POST", "path": "/api/v3/pet", "query": null, "api_key": "key-123",
                   "body": {"name": "Rex", "photoUrls": ["https://img.example/rex.png"], "status": "available"}}),
        ],
        "the invalid calls sent nothing; the valid ones what the document says"
    );

    // The Toolbox file's sources: its PostgreSQL database (named as tools.yaml names it) and a
    // SQLite file.
    let pg = super::procs::pg::server();
    let admin = format!("postgres://bulkhead@127.0.0.1:{}/postgres", pg.port);
    let _ = super::procs::pg::psql(&admin, "CREATE DATABASE toolbox_db");
    super::procs::pg::psql(
        &format!("postgres://bulkhead@127.0.0.1:{}/toolbox_db", pg.port),
        "DROP TABLE IF EXISTS hotels, flights;
         CREATE TABLE hotels (id int, name text);
         INSERT INTO hotels VALUES (1, 'Hilton Basel'), (2, 'Hyatt Regency');
         CREATE TABLE flights (id int, airline text, flight_number text, user_id text);
         INSERT INTO flights VALUES (1, 'CY', '888', 'ana'), (2, 'DL', '1234', 'bo');",
    )
    .unwrap();
    let db = root.join("travel-users.db");
    let made = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE users (name TEXT, age INTEGER)'); c.executemany('INSERT INTO users VALUES (?,?)', [('Ada',36),('Alan',41),('Al',12),('Bo',50)]); c.commit()",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let (mut child, url) = serve(
        exe,
        root,
        config,
        "travel",
        &[
            ("USER_NAME", "bulkhead".into()),
            ("PASSWORD", "unused".into()),
            ("TRAVEL_MY_PG_SOURCE_HOST", "127.0.0.1".into()),
            ("TRAVEL_MY_PG_SOURCE_PORT", pg.port.to_string()),
            ("TRAVEL_MY_SQLITE_DB_PATH", db.display().to_string()),
        ],
    );
    let got = python(
        &url,
        "trips",
        json!([
            {"tool": "search_hotels_by_name", "args": {"name": "Hil"}},
            {"tool": "search_flights_by_number", "args": {"airline": "CY", "flight_number": "888"}},
            {"tool": "search_flights_by_user_id", "args": {}},
            {"tool": "search_users", "args": {"name": "A%", "min_age": 30}},
            {"tool": "search_users", "args": {"name": "A%", "min_age": "thirty"}},
        ]),
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let calls = got["calls"].as_array().unwrap();
    let t = |i: usize| calls[i]["text"].as_str().unwrap().to_owned();
    assert!(
        got["tools"]["search_flights_by_user_id"]["properties"]
            .get("user_id")
            .is_none(),
        "the claim-bound parameter is not the model's: {got}"
    );
    for (i, call) in calls.iter().take(4).enumerate() {
        assert!(!call["error"].as_bool().unwrap(), "call {i}: {got}");
    }
    assert!(
        t(0).contains("Hilton Basel") && !t(0).contains("Hyatt"),
        "{got}"
    );
    assert!(t(1).contains("888"), "{got}");
    assert!(
        t(2).contains("888") && !t(2).contains("1234"),
        "ana's flights only: {got}"
    );
    assert!(
        t(3).contains("Ada")
            && t(3).contains("Alan")
            && !t(3).contains("\"Al\"")
            && !t(3).contains("Bo"),
        "{got}"
    );
    assert!(
        calls[4]["error"].as_bool().unwrap() && t(4).contains("min_age"),
        "{got}"
    );
}
