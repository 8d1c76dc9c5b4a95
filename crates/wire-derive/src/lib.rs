//! `#[derive(WireRecord)]` for `#[repr(C)]` structs with named fields.
//!
//! Written without `syn`: the macro only needs the struct name, the field
//! names and the field types as opaque token runs. Layout comes from the
//! compiler (`offset_of!`, `size_of`, `align_of`), field types from the
//! `WireField` trait, so the macro never guesses a layout. Fields must be
//! integers, floats, fixed arrays of those, or other `WireRecord` structs:
//! types that are valid for every bit pattern, which is what makes the
//! in-place view (`gridwire_wire::view`) sound.

use proc_macro::{Delimiter, Spacing, TokenStream, TokenTree};

#[proc_macro_derive(WireRecord)]
pub fn derive_wire_record(input: TokenStream) -> TokenStream {
    match expand(input) {
        Ok(ts) => ts,
        Err(msg) => format!("compile_error!({msg:?});")
            .parse()
            .unwrap_or_default(),
    }
}

fn expand(input: TokenStream) -> Result<TokenStream, String> {
    let toks: Vec<TokenTree> = input.into_iter().collect();
    let mut i = 0;
    let mut repr_c = false;
    let mut name = None;
    let mut body = None;
    while i < toks.len() {
        match &toks[i] {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = toks.get(i + 1) {
                    let s = g.stream().to_string().replace(' ', "");
                    if s.starts_with("repr(")
                        && s.trim_start_matches("repr(")
                            .trim_end_matches(')')
                            .split(',')
                            .any(|x| x == "C")
                    {
                        repr_c = true;
                    }
                }
                i += 2;
                continue;
            }
            TokenTree::Ident(id) if id.to_string() == "struct" => {
                match toks.get(i + 1) {
                    Some(TokenTree::Ident(n)) => name = Some(n.to_string()),
                    _ => return Err("expected a struct name".into()),
                }
                match toks.get(i + 2) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                        body = Some(g.stream())
                    }
                    Some(TokenTree::Punct(p)) if p.as_char() == '<' => {
                        return Err("derive(WireRecord) does not support generic structs".into())
                    }
                    _ => return Err("derive(WireRecord) needs a struct with named fields".into()),
                }
                break;
            }
            TokenTree::Ident(id) if id.to_string() == "enum" || id.to_string() == "union" => {
                return Err("derive(WireRecord) supports structs only".into());
            }
            _ => {}
        }
        i += 1;
    }
    let name = name.ok_or("expected a struct")?;
    let body = body.ok_or("expected a struct body")?;
    if !repr_c {
        return Err(format!(
            "derive(WireRecord) requires #[repr(C)] on `{name}`: the wire layout is the C layout"
        ));
    }
    let fields = parse_fields(body)?;
    if fields.is_empty() {
        return Err("derive(WireRecord) needs at least one field".into());
    }
    let mut calls = String::new();
    let mut asserts = String::new();
    for (f, ty) in &fields {
        let fname = f.trim_start_matches("r#");
        calls.push_str(&format!(
            ".field_at({fname:?}, <{ty} as ::gridwire_wire::derive_support::WireField>::field_type(), ::core::mem::offset_of!({name}, {f}) as u32)"
        ));
        asserts.push_str(&format!(
            "::gridwire_wire::derive_support::assert_wire_field::<{ty}>();"
        ));
    }
    let code = format!(
        r#"
        // SAFETY: the struct is #[repr(C)] (checked by the derive), every field
        // implements WireField (only integers, floats, arrays and WireRecords,
        // all valid for every bit pattern), and the format is built from the
        // compiler's own offsets and size.
        unsafe impl ::gridwire_wire::WireRecord for {name} {{
            fn format() -> ::std::sync::Arc<::gridwire_wire::Format> {{
                fn _check() {{ {asserts} }}
                static CELL: ::std::sync::OnceLock<::std::sync::Arc<::gridwire_wire::Format>> = ::std::sync::OnceLock::new();
                CELL.get_or_init(|| {{
                    ::gridwire_wire::FormatBuilder::new({name:?})
                        {calls}
                        .size(::core::mem::size_of::<{name}>() as u32)
                        .align(::core::mem::align_of::<{name}>() as u32)
                        .build()
                        .expect("a #[repr(C)] struct of wire fields always forms a valid format")
                }}).clone()
            }}
        }}
        "#
    );
    code.parse()
        .map_err(|e| format!("internal derive error: {e:?}"))
}

/// Split `name: Type, ...` at top-level commas, skipping attributes and visibility.
fn parse_fields(body: TokenStream) -> Result<Vec<(String, String)>, String> {
    let toks: Vec<TokenTree> = body.into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        // attributes
        while let Some(TokenTree::Punct(p)) = toks.get(i) {
            if p.as_char() == '#' {
                i += 2;
            } else {
                break;
            }
        }
        // visibility: `pub` optionally followed by `(...)`
        if let Some(TokenTree::Ident(id)) = toks.get(i) {
            if id.to_string() == "pub" {
                i += 1;
                if let Some(TokenTree::Group(g)) = toks.get(i) {
                    if g.delimiter() == Delimiter::Parenthesis {
                        i += 1;
                    }
                }
            }
        }
        let Some(TokenTree::Ident(fname)) = toks.get(i) else {
            if i >= toks.len() {
                break;
            }
            return Err("expected a field name".into());
        };
        i += 1;
        match toks.get(i) {
            Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Alone => {
                i += 1
            }
            _ => return Err(format!("expected `:` after field `{fname}`")),
        }
        let mut ty = TokenStream::new();
        let mut depth = 0i32;
        while i < toks.len() {
            if let TokenTree::Punct(p) = &toks[i] {
                match p.as_char() {
                    '<' => depth += 1,
                    '>' => depth -= 1,
                    ',' if depth == 0 => break,
                    _ => {}
                }
            }
            ty.extend(std::iter::once(toks[i].clone()));
            i += 1;
        }
        i += 1; // the comma
        out.push((fname.to_string(), ty.to_string()));
    }
    Ok(out)
}
