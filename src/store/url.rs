//! A store URL's own query parameters, taken out before the URL goes to
//! its driver.

/// `url` without the query parameters `take` keeps for the store: it sees
/// each `name=value` in order and answers whether it took it; the
/// parameters it leaves stay in the URL, in order.
pub(crate) fn take_params(
    url: &str,
    mut take: impl FnMut(&str, &str) -> Result<bool, String>,
) -> Result<String, String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(url.to_owned());
    };
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !take(name, value)? {
            rest.push(pair);
        }
    }
    Ok(if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_parameters_leave_the_url() {
        let mut seen = Vec::new();
        let left = take_params("db://h/x?table=t&sslmode=require&&flag", |name, value| {
            seen.push(format!("{name}={value}"));
            Ok(name == "table")
        });
        assert_eq!(left.as_deref(), Ok("db://h/x?sslmode=require&flag"));
        assert_eq!(seen, ["table=t", "sslmode=require", "flag="]);
        assert_eq!(
            take_params("db://h/x?table=t", |_, _| Ok(true)).as_deref(),
            Ok("db://h/x")
        );
        assert_eq!(
            take_params("plain", |_, _| Ok(true)).as_deref(),
            Ok("plain")
        );
        assert!(take_params("db://h?bad=1", |_, _| Err("no".into())).is_err());
    }
}
