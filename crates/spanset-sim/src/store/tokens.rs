//! Bearer tokens of a simulated cluster that enforces authentication (`spanset sim --auth`):
//! the administrator's static token from the kubeconfig, and ServiceAccount tokens minted by
//! the TokenRequest API — bound to the ServiceAccount's uid and expiring like the real ones.
//! The authenticator in the API server maps a token to the [`UserInfo`] it stands for.

use std::{
    collections::{BTreeMap, HashMap},
    time::Instant,
};

use base64::Engine;
use parking_lot::Mutex;

/// Who a request is from, as the authenticator tells the authorizer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// `kubernetes-admin`, `system:serviceaccount:NS:NAME`.
    pub name: String,
    /// `system:masters`, `system:serviceaccounts`, `system:authenticated`…
    pub groups: Vec<String>,
    /// The user's uid, when the authenticator knows one (a ServiceAccount token: the
    /// ServiceAccount's uid); empty otherwise. `kubectl auth whoami` prints it.
    pub uid: String,
    /// What else the authenticator tells (a ServiceAccount token's credential id).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The `extra` key under which the apiserver names the credential a request came with.
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

impl UserInfo {
    /// A user by name and groups, with no uid or extra.
    pub fn named(name: &str, groups: Vec<String>) -> Self {
        Self { name: name.into(), groups, ..Default::default() }
    }

    /// The user a ServiceAccount's token stands for.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self::named(
            &format!("system:serviceaccount:{namespace}:{name}"),
            vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        )
    }

    /// The kubeconfig's administrator (what kubeadm's `admin.conf` holds).
    pub fn admin() -> Self {
        Self::named("kubernetes-admin", vec!["system:masters".into(), "system:authenticated".into()])
    }
}

/// The ServiceAccount a token is bound to: it stops working once that object is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundTo {
    /// Namespace of the ServiceAccount.
    pub namespace: String,
    /// Name of the ServiceAccount.
    pub name: String,
    /// uid of the ServiceAccount when the token was minted.
    pub uid: String,
}

#[derive(Debug, Clone)]
struct Issued {
    user: UserInfo,
    bound: Option<BoundTo>,
    expires: Option<Instant>,
}

/// What a token lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A live token.
    Valid(UserInfo, Option<BoundTo>),
    /// Unknown, or past its expiry.
    Invalid,
}

/// Every token a cluster accepts.
#[derive(Debug, Default)]
pub struct TokenStore {
    issued: Mutex<HashMap<String, Issued>>,
}

/// 32 random bytes, URL-safe base64: unguessable and safe in headers.
fn random_part() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl TokenStore {
    /// Issues the administrator's token (no expiry).
    pub fn issue_admin(&self) -> String {
        let token = random_part();
        self.issued.lock().insert(token.clone(), Issued { user: UserInfo::admin(), bound: None, expires: None });
        token
    }

    /// Mints a ServiceAccount token valid until `expires`, shaped like the real JWT (header,
    /// claims and a signature part), so tools that split it on dots are not surprised.
    pub fn issue_for(&self, bound: BoundTo, audiences: &[String], lifetime_secs: i64, expires: Instant) -> String {
        let now = jiff::Timestamp::now().as_second();
        let enc = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let header = enc(serde_json::json!({"alg": "RS256", "kid": "sim"}));
        let jti = uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string();
        let claims = enc(serde_json::json!({
            "aud": audiences, "exp": now + lifetime_secs, "iat": now, "nbf": now, "jti": jti,
            "iss": "https://kubernetes.default.svc.cluster.local",
            "kubernetes.io": {"namespace": bound.namespace, "serviceaccount": {"name": bound.name, "uid": bound.uid}},
            "sub": format!("system:serviceaccount:{}:{}", bound.namespace, bound.name),
        }));
        let token = format!("{header}.{claims}.{}", random_part());
        // As the apiserver's ServiceAccount authenticator: the account's uid, and the token's
        // id as the credential id.
        let mut user = UserInfo::service_account(&bound.namespace, &bound.name);
        user.uid = bound.uid.clone();
        user.extra.insert(CREDENTIAL_ID.into(), vec![format!("JTI={jti}")]);
        let mut issued = self.issued.lock();
        // Expired tokens are forgotten as new ones are minted, so the store stays small.
        let now = Instant::now();
        issued.retain(|_, i| i.expires.is_none_or(|e| now < e));
        issued.insert(token.clone(), Issued { user, bound: Some(bound), expires: Some(expires) });
        token
    }

    /// Who a token stands for, if it is live.
    pub fn lookup(&self, token: &str) -> Lookup {
        let mut issued = self.issued.lock();
        match issued.get(token) {
            Some(i) if i.expires.is_none_or(|e| Instant::now() < e) => Lookup::Valid(i.user.clone(), i.bound.clone()),
            Some(_) => {
                issued.remove(token);
                Lookup::Invalid
            }
            None => Lookup::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn tokens_name_their_user_and_expire() {
        let store = TokenStore::default();
        let admin = store.issue_admin();
        assert_eq!(store.lookup(&admin), Lookup::Valid(UserInfo::admin(), None));
        let bound = BoundTo { namespace: "ns".into(), name: "sa".into(), uid: "u".into() };
        let live = store.issue_for(bound.clone(), &[], 3600, Instant::now() + Duration::from_secs(60));
        assert_eq!(live.split('.').count(), 3, "shaped like a JWT");
        match store.lookup(&live) {
            Lookup::Valid(user, Some(b)) => {
                assert_eq!(user.name, "system:serviceaccount:ns:sa");
                assert!(user.groups.contains(&"system:serviceaccounts:ns".to_string()));
                assert_eq!(user.uid, "u", "the ServiceAccount's uid");
                assert!(user.extra[CREDENTIAL_ID][0].starts_with("JTI="), "{:?}", user.extra);
                assert_eq!(b, bound);
            }
            other => panic!("{other:?}"),
        }
        let expired = store.issue_for(bound, &[], 600, Instant::now());
        assert_eq!(store.lookup(&expired), Lookup::Invalid);
        assert_eq!(store.lookup("made-up"), Lookup::Invalid);
    }
}
