//! Parameters bound to the caller's token (`from_claim:`): their values come from the session
//! token's claims, never from the model; `exchange:<audience>` binds a token of that audience
//! in the user's name (the token service's upstream exchange).
//!
//! Invariant (enforced in this module, the one place bound values enter a call: [`bind`] for
//! claims, before any approval; [`bind_upstream`] for upstream tokens, after it): a bound
//! parameter holds the claim of the caller's verified token (or a token exchanged from it) and
//! nothing else. The model cannot see it (the generated `inputSchema` leaves it out) nor set it
//! (an argument of that name is refused by the schema before this runs, and `bind` overwrites or
//! removes whatever is there); a caller whose token lacks the claim is refused, never run with a
//! guess.

use crate::errors::ToolError;
use crate::identity::Identity;
use crate::server::JsonObject;
use crate::tooldef::ToolDef;
use serde_json::Value;

/// The claim prefix of a parameter bound to an upstream token of an audience.
pub const EXCHANGE: &str = "exchange:";

/// Sets `tool`'s parameters bound to claims in `args` from the caller: `sub` is the verified
/// user, every other claim is read from the token's claims (`claims`; none on stdio and
/// in-process calls). Upstream tokens (`exchange:`) are left to [`bind_upstream`], which runs
/// after a person approved the call: the question shown to them and its digest never hold one.
pub fn bind(
    tool: &ToolDef,
    args: &mut JsonObject,
    id: &Identity,
    claims: Option<&crate::approval::TokenClaims>,
) -> Result<(), ToolError> {
    for b in tool.bound {
        if b.claim.starts_with(EXCHANGE) {
            // Never the model's either: a value it slipped in is gone until the token is set.
            args.remove(b.param);
            continue;
        }
        let value = match b.claim {
            "sub" => Some(id.user().to_owned()),
            "session_id" => Some(id.session().to_owned()),
            claim => claims
                .and_then(|c| c.0.get(claim))
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        let Some(value) = value else {
            return Err(ToolError::fatal(format!(
                "`{}` needs the `{}` claim of your sign-in, and your token does not carry it; ask the operator to have the token service copy it (token_service.claims)",
                tool.name, b.claim
            )));
        };
        args.insert(b.param.to_owned(), Value::String(value));
    }
    Ok(())
}

/// Sets `tool`'s parameters bound to `exchange:<audience>`: a token of that audience in the
/// caller's name, from the token service (`tokens`) and the provider's token the session token
/// carries (`claims`).
pub async fn bind_upstream(
    tool: &ToolDef,
    args: &mut JsonObject,
    id: &Identity,
    claims: Option<&crate::approval::TokenClaims>,
    tokens: Option<&crate::sessions::TokenService>,
) -> Result<(), ToolError> {
    for b in tool.bound {
        let Some(audience) = b.claim.strip_prefix(EXCHANGE) else {
            continue;
        };
        let (Some(tokens), Some(claims)) = (tokens, claims) else {
            return Err(ToolError::fatal(format!(
                "`{}` calls a service in your name, and this instance has no token service to ask for a token of `{audience}`",
                tool.name
            )));
        };
        let got = tokens
            .upstream_token(id.user(), &claims.0, audience)
            .await
            .map_err(|e| {
                ToolError::fatal(format!(
                    "`{}` cannot get a token for `{audience}` in your name: {e}",
                    tool.name
                ))
            })?;
        args.insert(b.param.to_owned(), Value::String(got.token));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooldef::{Annotations, Bound, Target};

    static TOOL: ToolDef = ToolDef {
        name: "mine",
        title: None,
        description: "",
        permission: crate::policy::Permission::Read,
        context: "default",
        sensitivity: crate::policy::Sensitivity::Internal,
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: "{}",
        output_schema: None,
        dataset: "",
        rate_limit: None,
        approval: None,
        inspection: crate::tooldef::Inspection::On,
        bound: &[
            Bound {
                param: "owner",
                claim: "sub",
            },
            Bound {
                param: "email",
                claim: "email",
            },
        ],
        target: Target::Handler,
    };

    #[test]
    fn bound_values_come_from_the_token_and_overwrite_anything_else() {
        let id = Identity::new("ana", "s1").unwrap();
        let claims = crate::approval::TokenClaims(std::sync::Arc::new(
            serde_json::json!({"email": "ana@example.test"})
                .as_object()
                .unwrap()
                .clone(),
        ));
        let mut args = JsonObject::new();
        args.insert("owner".into(), "ben".into());
        bind(&TOOL, &mut args, &id, Some(&claims)).unwrap();
        assert_eq!(args["owner"], "ana");
        assert_eq!(args["email"], "ana@example.test");
        let err = bind(&TOOL, &mut JsonObject::new(), &id, None).unwrap_err();
        assert!(err.to_string().contains("`email` claim"), "{err}");
    }
}
