//! `--policy TOOL=P` and `--default-policy P`: `sync`, `task` or `auto:MS`.

use std::time::Duration;

use mcp_task_layer::TaskPolicy;

/// A policy as written on the command line.
pub(crate) fn parse(text: &str) -> Result<TaskPolicy, String> {
    match text {
        "sync" => Ok(TaskPolicy::Sync),
        "task" => Ok(TaskPolicy::Task),
        _ => match text.strip_prefix("auto:").map(str::parse::<u64>) {
            Some(Ok(ms)) => Ok(TaskPolicy::Auto {
                within: Duration::from_millis(ms),
            }),
            _ => Err(format!("{text:?} is not a policy: sync, task or auto:MS")),
        },
    }
}

/// `TOOL=P`.
pub(crate) fn parse_tool(text: &str) -> Result<(String, TaskPolicy), String> {
    let (tool, policy) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not TOOL=POLICY"))?;
    if tool.is_empty() {
        return Err(format!("{text:?} names no tool"));
    }
    Ok((tool.to_owned(), parse(policy)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_bad_ones_say_why() {
        assert_eq!(parse("sync"), Ok(TaskPolicy::Sync));
        assert_eq!(parse("task"), Ok(TaskPolicy::Task));
        assert_eq!(
            parse("auto:250"),
            Ok(TaskPolicy::Auto {
                within: Duration::from_millis(250)
            })
        );
        assert!(parse("auto:")
            .unwrap_err()
            .contains("sync, task or auto:MS"));
        assert!(parse("later").is_err());
        assert_eq!(parse_tool("greet=sync").unwrap().0, "greet");
        assert!(parse_tool("=sync").is_err());
        assert!(parse_tool("greet").is_err());
    }
}
