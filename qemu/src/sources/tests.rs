use super::*;

fn policy(list: &[&str]) -> SourcePolicy {
    SourcePolicy::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn public_addresses_only_by_default() {
    let p = SourcePolicy::default();
    for public in ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::ffff:93.184.215.14", "100.128.0.1"] {
        assert!(p.check(ip(public)).is_ok(), "{public}");
    }
    for (addr, class) in [
        ("127.0.0.1", "loopback"),
        ("127.42.0.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "CGNAT"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "multicast or broadcast"),
        ("ff02::1", "multicast"),
        ("192.0.2.1", "documentation"),
        ("2001:db8::1", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("240.0.0.1", "reserved"),
        ("2002:7f00:1::", "6to4"),
        ("2001:0:7f00:1::", "Teredo"),
        ("64:ff9b::7f00:1", "NAT64"),
    ] {
        let e = p.check(ip(addr)).unwrap_err().to_string();
        assert!(e.contains(class) && e.contains("--image-source-allow public"), "{addr}: {e}");
    }
}

#[test]
fn an_administrator_opens_networks_by_name() {
    let p = policy(&["127.0.0.0/8", "::1", "10.9.0.0/16"]);
    assert!(p.check(ip("127.0.0.9")).is_ok());
    assert!(p.check(ip("::1")).is_ok());
    assert!(p.check(ip("10.9.3.4")).is_ok());
    let e = p.check(ip("10.1.2.3")).unwrap_err().to_string();
    assert!(e.contains("private") && e.contains("127.0.0.0/8,::1/128,10.9.0.0/16"), "{e}");
    // Without `public`, public addresses are refused too.
    let e = p.check(ip("93.184.215.14")).unwrap_err().to_string();
    assert!(e.contains("not among"), "{e}");
    let both = policy(&["public", "127.0.0.1"]);
    assert!(both.check(ip("93.184.215.14")).is_ok() && both.check(ip("127.0.0.1")).is_ok());
    assert!(both.check(ip("127.0.0.2")).is_err());
}

#[test]
fn the_server_s_own_sockets_are_never_fetched_from() {
    let p = policy(&["127.0.0.0/8"]).with_own(vec!["127.0.0.1:8000".parse().unwrap(), "0.0.0.0:8443".parse().unwrap()]);
    let own = |a: &str| matches!(p.check_socket(a.parse().unwrap()), Err(Refused::Own(_)));
    assert!(own("127.0.0.1:8000"));
    assert!(own("127.0.0.1:8443"), "an unspecified listening address is every address of the host");
    assert!(own("[::ffff:127.0.0.1]:8000"));
    assert!(!own("127.0.0.1:8001"));
    assert!(p.check_socket("127.0.0.2:8000".parse().unwrap()).is_ok());
}

#[tokio::test]
async fn urls_are_checked_socket_by_socket_names_resolved() {
    let p = policy(&["127.0.0.1"]).with_own(vec!["127.0.0.1:8000".parse().unwrap()]);
    let check = |u: &str| {
        let url = reqwest::Url::parse(u).unwrap();
        let p = p.clone();
        async move { p.check_url(&url).await }
    };
    assert!(check("http://127.0.0.1:9/x").await.is_ok());
    assert!(check("http://localhost:9/x").await.is_ok());
    assert!(check("http://localhost:8000/api/openapi.json").await.unwrap_err().to_string().contains("own listening socket"));
    assert!(check("http://[::1]:9/x").await.unwrap_err().to_string().contains("loopback"));
    assert!(check("http://127.0.0.1/x").await.is_ok(), "port 80 is the scheme's");
}

#[test]
fn bad_entries_are_named() {
    for bad in ["nope", "127.0.0.0/33", "::/129", "1.2.3.4/x"] {
        let e = SourcePolicy::parse(&[bad.into()]).unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}
