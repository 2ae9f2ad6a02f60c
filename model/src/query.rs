//! List queries as OSAC's clients send them: `filter`, a CEL expression over
//! the object as its JSON shows it (`this.metadata.name == 'web'`,
//! `this.id in ['a', 'b']`, `this.status.state == VIRTUAL_MACHINE_STATE_READY`,
//! `this.metadata.name.startsWith('web') && !(this.spec.state == 'stopped')`,
//! `'env' in this.metadata.labels`), and `order`, SQL-like sort keys
//! (`this.metadata.name desc, this.id`).
//!
//! The subset: `||`, `&&`, `!`, parentheses; `==`, `!=`, `<`, `<=`, `>`,
//! `>=` on strings (lexicographic; timestamps are RFC 3339 in UTC, so they
//! sort in time) and numbers; `in` a list literal, an array or a map's
//! keys; the methods `startsWith`, `endsWith` and `contains`; string
//! (`'…'`, `"…"`), number, `true`, `false`, `null` and list literals;
//! upper-case identifiers (enum values) as strings. A field the object
//! lacks is `null`.

use std::cmp::Ordering;

use serde_json::Value;

/// A parsed `filter`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter(Expr);

/// A parsed `order`: sort keys, most significant first.
#[derive(Debug, Clone, PartialEq)]
pub struct Order(Vec<(Vec<String>, bool)>);

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Operand, Op, Operand),
    Call(Operand, Method, Operand),
    Is(Operand),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Method {
    StartsWith,
    EndsWith,
    Contains,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Vec<String>),
    Literal(Value),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Num(f64),
    Sym(&'static str),
}

const SYMBOLS: [&str; 15] = ["==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "[", "]", ",", "."];

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let at = text.len() - rest.len();
        let c = rest.chars().next().unwrap_or(' ');
        let len = if c == '\'' || c == '"' {
            let end = rest[1..].find(c).ok_or_else(|| format!("the string at {at} is not closed"))?;
            out.push(Token::Str(rest[1..=end].to_owned()));
            end + 2
        } else if c.is_ascii_digit() || (c == '-' && rest[1..].starts_with(|d: char| d.is_ascii_digit())) {
            let end = rest[1..].find(|d: char| !(d.is_ascii_digit() || d == '.')).map_or(rest.len(), |e| e + 1);
            out.push(Token::Num(rest[..end].parse().map_err(|_| format!("{:?} at {at} is not a number", &rest[..end]))?));
            end
        } else if c.is_alphabetic() || c == '_' {
            let end = rest.find(|d: char| !(d.is_alphanumeric() || d == '_')).unwrap_or(rest.len());
            out.push(Token::Ident(rest[..end].to_owned()));
            end
        } else if let Some(s) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            out.push(Token::Sym(s));
            s.len()
        } else {
            return Err(format!("unexpected {c:?} at {at}"));
        };
        rest = rest[len..].trim_start();
    }
    Ok(out)
}

/// The longest filter accepted, in bytes.
pub const MAX_FILTER_LEN: usize = 4096;

/// How deep parentheses and `!` may nest in a filter.
pub const MAX_FILTER_DEPTH: usize = 32;

/// The most comparisons, calls and tests one filter may hold.
pub const MAX_FILTER_TERMS: usize = 256;

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// How deep the parse is in parentheses and `!` now.
    depth: usize,
    /// Comparisons, calls and tests read so far.
    terms: usize,
}

impl Parser {
    fn new(tokens: Vec<Token>) -> Self {
        Self { tokens, at: 0, depth: 0, terms: 0 }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, sym: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Sym(s)) if *s == sym);
        self.at += usize::from(hit);
        hit
    }

    fn expect(&mut self, sym: &str) -> Result<(), String> {
        if self.eat(sym) { Ok(()) } else { Err(format!("expected {sym:?} {}", self.where_())) }
    }

    fn where_(&self) -> String {
        match self.peek() {
            Some(t) => format!("before {t:?} (token {})", self.at + 1),
            None => "at the end".into(),
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.eat("||") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while self.eat("&&") {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            self.deeper()?;
            let e = Expr::Not(Box::new(self.unary()?));
            self.depth -= 1;
            return Ok(e);
        }
        if self.eat("(") {
            self.deeper()?;
            let e = self.or()?;
            self.expect(")")?;
            self.depth -= 1;
            return Ok(e);
        }
        self.comparison()
    }

    /// Goes one level deeper into parentheses or `!`, unless that is too deep.
    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_FILTER_DEPTH {
            return Err(format!("parentheses and '!' nest more than {MAX_FILTER_DEPTH} deep {}", self.where_()));
        }
        Ok(())
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        self.terms += 1;
        if self.terms > MAX_FILTER_TERMS {
            return Err(format!("more than {MAX_FILTER_TERMS} comparisons {}", self.where_()));
        }
        let (left, method) = self.operand()?;
        if let Some(m) = method {
            self.expect("(")?;
            let (arg, _) = self.operand()?;
            self.expect(")")?;
            return Ok(Expr::Call(left, m, arg));
        }
        let op = match self.peek() {
            Some(Token::Sym("==")) => Op::Eq,
            Some(Token::Sym("!=")) => Op::Ne,
            Some(Token::Sym("<")) => Op::Lt,
            Some(Token::Sym("<=")) => Op::Le,
            Some(Token::Sym(">")) => Op::Gt,
            Some(Token::Sym(">=")) => Op::Ge,
            Some(Token::Ident(i)) if i == "in" => Op::In,
            _ => return Ok(Expr::Is(left)),
        };
        self.at += 1;
        let (right, _) = self.operand()?;
        Ok(Expr::Compare(left, op, right))
    }

    /// An operand, and the method called on it when one follows.
    fn operand(&mut self) -> Result<(Operand, Option<Method>), String> {
        let here = self.where_();
        match self.next() {
            Some(Token::Str(s)) => Ok((Operand::Literal(Value::String(s)), None)),
            Some(Token::Num(n)) => Ok((Operand::Literal(number(n)), None)),
            Some(Token::Sym("[")) => self.list().map(|l| (Operand::Literal(l), None)),
            Some(Token::Ident(i)) => self.path(i),
            _ => Err(format!("expected a field, a value or a list {here}")),
        }
    }

    fn list(&mut self) -> Result<Value, String> {
        let mut items = Vec::new();
        while !self.eat("]") {
            if !items.is_empty() {
                self.expect(",")?;
            }
            match self.operand()? {
                (Operand::Literal(v), None) => items.push(v),
                _ => return Err(format!("a list holds values only {}", self.where_())),
            }
        }
        Ok(Value::Array(items))
    }

    fn path(&mut self, first: String) -> Result<(Operand, Option<Method>), String> {
        let simple = !matches!(self.peek(), Some(Token::Sym(".") | Token::Sym("[")));
        match first.as_str() {
            "true" | "false" if simple => return Ok((Operand::Literal(Value::Bool(first == "true")), None)),
            "null" if simple => return Ok((Operand::Literal(Value::Null), None)),
            e if simple && e.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') => {
                return Ok((Operand::Literal(Value::String(first)), None));
            }
            _ => {}
        }
        // `this` is the object of a list; `event` the event of a watch.
        let mut path = if first == "this" || first == "event" { Vec::new() } else { vec![first] };
        loop {
            if self.eat(".") {
                let here = self.where_();
                let Some(Token::Ident(name)) = self.next() else { return Err(format!("expected a field name {here}")) };
                let method = match name.as_str() {
                    "startsWith" => Some(Method::StartsWith),
                    "endsWith" => Some(Method::EndsWith),
                    "contains" => Some(Method::Contains),
                    _ => None,
                };
                if method.is_some() && matches!(self.peek(), Some(Token::Sym("("))) {
                    return Ok((Operand::Path(path), method));
                }
                path.push(name);
            } else if self.eat("[") {
                let here = self.where_();
                let Some(Token::Str(key)) = self.next() else { return Err(format!("expected a quoted key {here}")) };
                self.expect("]")?;
                path.push(key);
            } else {
                return Ok((Operand::Path(path), None));
            }
        }
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 { Value::from(n as i64) } else { Value::from(n) }
}

impl Filter {
    /// Parses a filter; the reason names where it went wrong.
    /// Longer than [`MAX_FILTER_LEN`], nested deeper than
    /// [`MAX_FILTER_DEPTH`] or with more than [`MAX_FILTER_TERMS`]
    /// comparisons, it is refused before it costs anything.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_FILTER_LEN {
            return Err(format!("it has {} bytes, more than the {MAX_FILTER_LEN} accepted", text.len()));
        }
        let mut p = Parser::new(tokens(text)?);
        let e = p.or()?;
        match p.peek() {
            None => Ok(Self(e)),
            Some(_) => Err(format!("unexpected {}", p.where_())),
        }
    }

    /// Whether `object` (its JSON) passes.
    pub fn matches(&self, object: &Value) -> bool {
        eval(&self.0, object)
    }
}

fn lookup<'a>(object: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(object, |v, k| v.get(k.as_str()).unwrap_or(&Value::Null))
}

fn value<'a>(o: &'a Operand, object: &'a Value) -> &'a Value {
    match o {
        Operand::Path(p) => lookup(object, p),
        Operand::Literal(v) => v,
    }
}

fn eval(e: &Expr, object: &Value) -> bool {
    match e {
        Expr::Or(a, b) => eval(a, object) || eval(b, object),
        Expr::And(a, b) => eval(a, object) && eval(b, object),
        Expr::Not(a) => !eval(a, object),
        Expr::Is(o) => value(o, object) == &Value::Bool(true),
        Expr::Call(o, m, arg) => match (value(o, object), value(arg, object)) {
            (Value::String(s), Value::String(a)) => match m {
                Method::StartsWith => s.starts_with(a.as_str()),
                Method::EndsWith => s.ends_with(a.as_str()),
                Method::Contains => s.contains(a.as_str()),
            },
            (Value::Array(items), a) if *m == Method::Contains => items.iter().any(|i| same(i, a)),
            _ => false,
        },
        Expr::Compare(a, op, b) => {
            let (a, b) = (value(a, object), value(b, object));
            match op {
                Op::Eq => same(a, b),
                Op::Ne => !same(a, b),
                Op::In => match b {
                    Value::Array(items) => items.iter().any(|i| same(a, i)),
                    Value::Object(m) => a.as_str().is_some_and(|k| m.contains_key(k)),
                    _ => false,
                },
                Op::Lt => ordered(a, b) == Some(Ordering::Less),
                Op::Le => matches!(ordered(a, b), Some(Ordering::Less | Ordering::Equal)),
                Op::Gt => ordered(a, b) == Some(Ordering::Greater),
                Op::Ge => matches!(ordered(a, b), Some(Ordering::Greater | Ordering::Equal)),
            }
        }
    }
}

/// Equality, numbers by value (`4 == 4.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The order of two strings or two numbers; none for anything else.
fn ordered(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// A total order for sorting: null, then booleans, numbers, strings, and anything else last.
fn sort_order(a: &Value, b: &Value) -> Ordering {
    let rank = |v: &Value| match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        _ => 4,
    };
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => ordered(a, b).unwrap_or(Ordering::Equal),
    })
}

impl Order {
    /// Parses `FIELD [asc|desc], …` (at most [`MAX_FILTER_LEN`] bytes).
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_FILTER_LEN {
            return Err(format!("it has {} bytes, more than the {MAX_FILTER_LEN} accepted", text.len()));
        }
        let mut keys = Vec::new();
        for part in text.split(',') {
            let words: Vec<&str> = part.split_whitespace().collect();
            let (field, desc) = match words.as_slice() {
                [f] => (*f, false),
                [f, d] if d.eq_ignore_ascii_case("asc") => (*f, false),
                [f, d] if d.eq_ignore_ascii_case("desc") => (*f, true),
                _ => return Err(format!("{:?} is not FIELD, FIELD asc or FIELD desc", part.trim())),
            };
            let mut p = Parser::new(tokens(field)?);
            let Some(Token::Ident(first)) = p.next() else { return Err(format!("{field:?} is not a field")) };
            match p.path(first)? {
                (Operand::Path(path), None) if p.peek().is_none() => keys.push((path, desc)),
                _ => return Err(format!("{field:?} is not a field")),
            }
        }
        Ok(Self(keys))
    }

    /// Compares two objects (their JSON) by the keys.
    pub fn compare(&self, a: &Value, b: &Value) -> Ordering {
        self.0.iter().fold(Ordering::Equal, |acc, (path, desc)| {
            acc.then_with(|| {
                let o = sort_order(lookup(a, path), lookup(b, path));
                if *desc { o.reverse() } else { o }
            })
        })
    }
}

#[cfg(test)]
mod tests;
