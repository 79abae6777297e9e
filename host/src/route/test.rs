//! What a rule tests of the field it reads: built by its config
//! (`RouteConfig::test`), applied by the routes. A file of its own so
//! that the config and the routes both import it and not each other.

#[derive(Debug, Clone)]
pub(super) enum Test {
    Always,
    Exists(bool),
    Equals(String),
    Matches(regex::Regex),
}
