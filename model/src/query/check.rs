//! The filter's limits, checked on its text and its tree before it is
//! evaluated, and the rewrite of enum names into strings.

use std::collections::BTreeSet;

use cel::ParseErrors;
use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::common::types::CelString;

use super::{MAX_FILTER_DEPTH, MAX_FILTER_TERMS, QueryError};

/// Refuses text whose brackets nest deeper than [`MAX_FILTER_DEPTH`]
/// (outside string literals), before the parser recurses into them.
pub(super) fn nesting(text: &str) -> Result<(), QueryError> {
    let (mut depth, mut quote, mut escaped) = (0usize, None, false);
    for c in text.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if matches!(c, '(' | '[' | '{') => {
                depth += 1;
                if depth > MAX_FILTER_DEPTH {
                    return Err(QueryError::TooDeep);
                }
            }
            None if matches!(c, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            None => {}
        }
    }
    Ok(())
}

/// The parser's errors as one line each: `LINE:COLUMN: why`.
pub(super) fn syntax(errors: ParseErrors) -> QueryError {
    if errors.errors.iter().any(|e| e.msg.starts_with("Recursion limit")) {
        return QueryError::TooDeep;
    }
    let lines: Vec<String> = errors.errors.iter().map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg)).collect();
    QueryError::Syntax(lines.join("; "))
}

/// Operators and calls that are not terms: logic and indexing.
const NOT_TERMS: [&str; 5] =
    [operators::LOGICAL_AND, operators::LOGICAL_OR, operators::LOGICAL_NOT, operators::INDEX, operators::NOT_STRICTLY_FALSE];

/// Counts terms and depth over the tree, and checks each macro.
#[derive(Default)]
struct Walk {
    terms: usize,
}

/// Refuses a tree deeper than twice [`MAX_FILTER_DEPTH`], with more than
/// [`MAX_FILTER_TERMS`] terms, or with a macro over a literal or inside
/// another macro.
pub(super) fn limits(expr: &IdedExpr) -> Result<(), QueryError> {
    Walk::default().visit(expr, 0, false)
}

impl Walk {
    fn visit(&mut self, e: &IdedExpr, depth: usize, in_macro: bool) -> Result<(), QueryError> {
        if depth > MAX_FILTER_DEPTH * 2 {
            return Err(QueryError::TooDeep);
        }
        let next = depth + 1;
        match &e.expr {
            Expr::Call(call) => {
                if !NOT_TERMS.contains(&call.func_name.as_str()) {
                    self.count()?;
                }
                if let Some(target) = &call.target {
                    self.visit(target, next, in_macro)?;
                }
                call.args.iter().try_for_each(|a| self.visit(a, next, in_macro))
            }
            Expr::Comprehension(c) => self.comprehension(c, next, in_macro),
            Expr::List(l) => l.elements.iter().try_for_each(|a| self.visit(a, next, in_macro)),
            Expr::Map(m) => m.entries.iter().try_for_each(|entry| match &entry.expr {
                cel::common::ast::EntryExpr::MapEntry(kv) => {
                    self.visit(&kv.key, next, in_macro)?;
                    self.visit(&kv.value, next, in_macro)
                }
                cel::common::ast::EntryExpr::StructField(f) => self.visit(&f.value, next, in_macro),
            }),
            Expr::Select(s) => self.visit(&s.operand, next, in_macro),
            Expr::Struct(s) => s.entries.iter().try_for_each(|entry| match &entry.expr {
                cel::common::ast::EntryExpr::StructField(f) => self.visit(&f.value, next, in_macro),
                cel::common::ast::EntryExpr::MapEntry(kv) => self.visit(&kv.value, next, in_macro),
            }),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }

    fn count(&mut self) -> Result<(), QueryError> {
        self.terms += 1;
        if self.terms > MAX_FILTER_TERMS { Err(QueryError::TooManyTerms) } else { Ok(()) }
    }

    /// A macro: one term; its range a field of the object; no macro inside.
    fn comprehension(&mut self, c: &ComprehensionExpr, depth: usize, in_macro: bool) -> Result<(), QueryError> {
        if in_macro || !is_field(&c.iter_range) {
            return Err(QueryError::Macro(macro_name(c)));
        }
        self.count()?;
        for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
            self.visit(part, depth, true)?;
        }
        Ok(())
    }
}

/// Whether `e` is a field of the object: `this` or `event`, then fields
/// and indexes by literal.
pub(super) fn is_field(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Call(call) if call.func_name == operators::INDEX => {
            matches!(call.args.as_slice(), [on, key] if is_field(on) && matches!(key.expr, Expr::Literal(_)))
        }
        _ => field_path(e).is_some(),
    }
}

/// The path of the field `e` names (`this.a.b`, `this.a['b']`, `event.…`),
/// or none when it is not such a field.
pub(super) fn field_path(e: &IdedExpr) -> Option<Vec<String>> {
    let mut steps = Vec::new();
    let mut at = e;
    loop {
        match &at.expr {
            Expr::Ident(root) if root == "this" || root == "event" => break,
            Expr::Select(s) if !s.test => {
                steps.push(s.field.clone());
                at = &s.operand;
            }
            Expr::Call(call) if call.func_name == operators::INDEX && call.target.is_none() => match call.args.as_slice() {
                [on, IdedExpr { expr: Expr::Literal(LiteralValue::String(key)), .. }] => {
                    steps.push(str::to_owned(key));
                    at = on;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
    steps.reverse();
    Some(steps)
}

/// The macro a comprehension was written as, for the error.
fn macro_name(c: &ComprehensionExpr) -> String {
    format!("the macro over {} (with {})", describe(&c.iter_range), c.iter_var)
}

fn describe(e: &IdedExpr) -> String {
    match &e.expr {
        Expr::Ident(i) => i.clone(),
        Expr::Select(s) => format!("{}.{}", describe(&s.operand), s.field),
        Expr::List(_) => "a list literal".into(),
        Expr::Map(_) => "a map literal".into(),
        Expr::Comprehension(_) => "a macro".into(),
        _ => "an expression".into(),
    }
}

/// Rewrites upper-case identifiers (`VIRTUAL_MACHINE_STATE_READY`) into
/// the strings of their names; a macro's own variables are left alone.
pub(super) fn enum_names(e: &mut IdedExpr) {
    rewrite(e, &BTreeSet::new());
}

fn is_enum_name(name: &str) -> bool {
    name.len() > 1
        && name.chars().any(|c| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn rewrite(e: &mut IdedExpr, bound: &BTreeSet<String>) {
    match &mut e.expr {
        Expr::Ident(name) if is_enum_name(name) && !bound.contains(name.as_str()) => {
            e.expr = Expr::Literal(LiteralValue::String(CelString::from(name.clone())));
        }
        Expr::Call(call) => {
            if let Some(t) = call.target.as_deref_mut() {
                rewrite(t, bound);
            }
            call.args.iter_mut().for_each(|a| rewrite(a, bound));
        }
        Expr::Comprehension(c) => {
            let mut inner = bound.clone();
            inner.extend([c.iter_var.clone(), c.accu_var.clone()]);
            inner.extend(c.iter_var2.clone());
            rewrite(&mut c.iter_range, bound);
            for part in [&mut c.accu_init, &mut c.loop_cond, &mut c.loop_step, &mut c.result] {
                rewrite(part, &inner);
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(|a| rewrite(a, bound)),
        Expr::Select(s) => rewrite(&mut s.operand, bound),
        _ => {}
    }
}
