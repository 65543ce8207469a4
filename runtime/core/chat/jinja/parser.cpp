// SPDX-License-Identifier: Apache-2.0
// Parser (see parser.h). Follows jinja2's grammar where real chat templates depend on its
// quirks: filters bind looser than unary minus, `**` is left-associative, an `is` test takes
// one bare argument (`is divisibleby 3`), `a if c` without else yields undefined.
#include "runtime/core/chat/jinja/parser.h"

#include "runtime/core/chat/jinja/text.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

namespace llmsvc::jinja {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, uint32_t max_depth) : t_(tokens), max_depth_(max_depth) {}

  Result<Body> run() {
    Body body;
    std::string end;
    auto st = parse_body({}, body, end);
    if (!st.ok()) return st;
    return body;
  }

 private:
  // Counts nesting (expressions and blocks) for the lifetime of one recursive step.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) { ++p.depth_; }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().kind == Tok::op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == Tok::name && cur().text == n; }

  static std::string describe(const Token& t) {
    static constexpr const char* kNames[] = {"template text", "'{%'", "'%}'", "'{{'", "'}}'"};
    if (static_cast<size_t>(t.kind) < std::size(kNames)) return kNames[static_cast<size_t>(t.kind)];
    if (t.kind == Tok::string) return "string literal";
    if (t.kind == Tok::eof) return "end of template";
    return std::string(t.kind == Tok::integer || t.kind == Tok::floating ? "number " : "") + text::quote(t.text);
  }

  Status error(const Token& at, const std::string& msg, Code code = Code::invalid_argument) const {
    return Status(code, "jinja: syntax error at " + where(at.pos) + ": " + msg);
  }
  Status unexpected(const std::string& expected) const {
    return error(cur(), "expected " + expected + ", found " + describe(cur()));
  }
  Status expect_op(std::string_view op) {
    if (!is_op(op)) return unexpected(text::quote(op));
    advance();
    return Status::Ok();
  }
  Status expect_block_end() {
    if (cur().kind != Tok::block_end) return unexpected("'%}'");
    advance();
    return Status::Ok();
  }
  Status check_depth() const {
    if (depth_ > max_depth_) return error(cur(), "nesting deeper than " + std::to_string(max_depth_) + " levels");
    return Status::Ok();
  }
  Result<std::string> expect_name(const char* what) {
    if (cur().kind != Tok::name) return unexpected(what);
    std::string n = cur().text;
    advance();
    return n;
  }

  ExprPtr node(ExprKind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // ---- statements ----

  // Parses text, outputs and statements until a `{% <one of ends> ...`; `end` receives the
  // keyword found (its tag's remaining tokens are left for the caller).
  Status parse_body(std::initializer_list<std::string_view> ends, Body& body, std::string& end) {
    DepthGuard guard(*this);
    LLMSVC_RETURN_IF_ERROR(check_depth());
    while (true) {
      const Token& t = cur();
      if (t.kind == Tok::eof) {
        if (ends.size() == 0) return Status::Ok();
        return error(t, "unexpected end of template, expected '" + std::string(*(ends.end() - 1)) + "'");
      }
      if (t.kind == Tok::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::text;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
        continue;
      }
      if (t.kind == Tok::var_begin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::output;
        s->pos = t.pos;
        advance();
        auto e = parse_tuple(true);
        if (!e.ok()) return e.status();
        s->expr = std::move(e).value();
        if (cur().kind != Tok::var_end) return unexpected("'}}'");
        advance();
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind != Tok::block_begin) return unexpected("a tag");
      advance();
      if (cur().kind == Tok::name) {
        for (std::string_view e : ends) {
          if (cur().text == e) {
            end = cur().text;
            advance();
            return Status::Ok();
          }
        }
      }
      auto s = parse_statement();
      if (!s.ok()) return s.status();
      body.push_back(std::move(s).value());
    }
  }

  Result<StmtPtr> parse_statement() {
    const Token& kw = cur();
    if (kw.kind != Tok::name) return unexpected("a statement name");
    auto s = std::make_unique<Stmt>();
    s->pos = kw.pos;
    const std::string k = kw.text;
    advance();
    Status st;
    if (k == "if") {
      st = parse_if(*s);
    } else if (k == "for") {
      st = parse_for(*s);
    } else if (k == "set") {
      st = parse_set(*s);
    } else if (k == "macro") {
      st = parse_macro(*s);
    } else if (k == "call") {
      st = parse_call_block(*s);
    } else if (k == "filter") {
      st = parse_filter_block(*s);
    } else if (k == "generation") {
      s->kind = StmtKind::generation;
      st = expect_block_end();
      std::string end;
      if (st.ok()) st = parse_body({"endgeneration"}, s->body, end);
      if (st.ok()) st = expect_block_end();
    } else if (k == "break" || k == "continue") {
      if (loop_depth_ == 0) return error(kw, "'" + k + "' outside of a loop");
      s->kind = k == "break" ? StmtKind::break_ : StmtKind::continue_;
      st = expect_block_end();
    } else if (k == "include" || k == "import" || k == "from" || k == "extends" || k == "block" || k == "with" ||
               k == "autoescape" || k == "do" || k == "trans" || k == "pluralize") {
      return error(kw, "unsupported statement '" + k + "'", Code::unsupported);
    } else {
      return error(kw, "unknown statement '" + k + "'");
    }
    if (!st.ok()) return st;
    return s;
  }

  Status parse_if(Stmt& s) {
    s.kind = StmtKind::if_;
    std::string end = "elif";
    while (end == "elif") {
      auto cond = parse_tuple(false);
      if (!cond.ok()) return cond.status();
      LLMSVC_RETURN_IF_ERROR(expect_block_end());
      Body body;
      LLMSVC_RETURN_IF_ERROR(parse_body({"elif", "else", "endif"}, body, end));
      s.branches.emplace_back(std::move(cond).value(), std::move(body));
    }
    if (end == "else") {
      LLMSVC_RETURN_IF_ERROR(expect_block_end());
      Body body;
      LLMSVC_RETURN_IF_ERROR(parse_body({"endif"}, body, end));
      s.branches.emplace_back(nullptr, std::move(body));
    }
    return expect_block_end();
  }

  // `a` or `a, b` (names only), as for-loop and set targets.
  Status parse_targets(std::vector<std::string>& out) {
    const bool paren = is_op("(");
    if (paren) advance();
    while (true) {
      auto n = expect_name("a variable name");
      if (!n.ok()) return n.status();
      out.push_back(std::move(n).value());
      if (!is_op(",")) break;
      advance();
      if (cur().kind != Tok::name) break;
    }
    if (paren) return expect_op(")");
    return Status::Ok();
  }

  Status parse_for(Stmt& s) {
    s.kind = StmtKind::for_;
    LLMSVC_RETURN_IF_ERROR(parse_targets(s.targets));
    if (!is_name("in")) return unexpected("'in'");
    advance();
    auto iter = parse_tuple(false);
    if (!iter.ok()) return iter.status();
    s.expr = std::move(iter).value();
    if (is_name("if")) {
      advance();
      auto f = parse_expression(true);
      if (!f.ok()) return f.status();
      s.filter = std::move(f).value();
    }
    if (is_name("recursive")) return error(cur(), "unsupported recursive for loop", Code::unsupported);
    LLMSVC_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    ++loop_depth_;
    Status st = parse_body({"endfor", "else"}, s.body, end);
    --loop_depth_;
    LLMSVC_RETURN_IF_ERROR(st);
    if (end == "else") {
      LLMSVC_RETURN_IF_ERROR(expect_block_end());
      LLMSVC_RETURN_IF_ERROR(parse_body({"endfor"}, s.else_body, end));
    }
    return expect_block_end();
  }

  Status parse_set(Stmt& s) {
    s.kind = StmtKind::set;
    if (cur().kind == Tok::name && peek().kind == Tok::op && peek().text == ".") {
      // {% set ns.attr = value %}
      s.targets.push_back(cur().text);
      advance();
      advance();
      auto attr = expect_name("an attribute name");
      if (!attr.ok()) return attr.status();
      s.text = std::move(attr).value();
      LLMSVC_RETURN_IF_ERROR(expect_op("="));
    } else {
      LLMSVC_RETURN_IF_ERROR(parse_targets(s.targets));
      if (!is_op("=")) {
        // Block set: {% set name | filters %}body{% endset %}
        if (s.targets.size() != 1) return unexpected("'='");
        if (is_op("|")) {
          auto f = parse_filter_chain(nullptr);
          if (!f.ok()) return f.status();
          s.filter = std::move(f).value();
        }
        LLMSVC_RETURN_IF_ERROR(expect_block_end());
        std::string end;
        LLMSVC_RETURN_IF_ERROR(parse_body({"endset"}, s.body, end));
        return expect_block_end();
      }
      advance();
    }
    auto value = parse_tuple(true);
    if (!value.ok()) return value.status();
    s.expr = std::move(value).value();
    return expect_block_end();
  }

  Status parse_params(std::vector<Param>& params) {
    LLMSVC_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (!params.empty()) LLMSVC_RETURN_IF_ERROR(expect_op(","));
      if (is_op(")")) break;
      auto n = expect_name("a parameter name");
      if (!n.ok()) return n.status();
      Param p{std::move(n).value(), nullptr};
      if (is_op("=")) {
        advance();
        auto d = parse_expression(true);
        if (!d.ok()) return d.status();
        p.default_value = std::move(d).value();
      }
      params.push_back(std::move(p));
    }
    advance();
    return Status::Ok();
  }

  Status parse_macro(Stmt& s) {
    s.kind = StmtKind::macro;
    auto n = expect_name("a macro name");
    if (!n.ok()) return n.status();
    s.name = std::move(n).value();
    LLMSVC_RETURN_IF_ERROR(parse_params(s.params));
    LLMSVC_RETURN_IF_ERROR(expect_block_end());
    return parse_callable_body(s, "endmacro");
  }

  // A macro's or call block's body: loops outside it do not count, and its use of
  // varargs / kwargs / caller is recorded (jinja2 accepts extra arguments only then).
  Status parse_callable_body(Stmt& s, std::string_view end_name) {
    const uint32_t saved_loops = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(&s);
    std::string end;
    Status st = parse_body({end_name}, s.body, end);
    macros_.pop_back();
    loop_depth_ = saved_loops;
    LLMSVC_RETURN_IF_ERROR(st);
    if (cur().kind == Tok::name && cur().text == s.name) advance();  // {% endmacro name %}
    return expect_block_end();
  }

  Status parse_call_block(Stmt& s) {
    s.kind = StmtKind::call_block;
    if (is_op("(")) LLMSVC_RETURN_IF_ERROR(parse_params(s.params));
    auto call = parse_expression(true);
    if (!call.ok()) return call.status();
    s.expr = std::move(call).value();
    if (s.expr->kind != ExprKind::call) return error(cur(), "expected a call after 'call'");
    LLMSVC_RETURN_IF_ERROR(expect_block_end());
    return parse_callable_body(s, "endcall");
  }

  Status parse_filter_block(Stmt& s) {
    s.kind = StmtKind::filter_block;
    auto f = parse_filter_chain(nullptr, /*leading_bar=*/false);
    if (!f.ok()) return f.status();
    s.filter = std::move(f).value();
    LLMSVC_RETURN_IF_ERROR(expect_block_end());
    std::string end;
    LLMSVC_RETURN_IF_ERROR(parse_body({"endfilter"}, s.body, end));
    return expect_block_end();
  }

  // ---- expressions ----

  // `a` or `a, b, ...` (a tuple) up to a tag end or ')'.
  Result<ExprPtr> parse_tuple(bool with_condexpr) {
    const Pos pos = cur().pos;
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!is_op(",")) break;
        advance();
        comma = true;
      }
      if (cur().kind == Tok::block_end || cur().kind == Tok::var_end || is_op(")")) break;
      auto e = parse_expression(with_condexpr);
      if (!e.ok()) return e;
      items.push_back(std::move(e).value());
    }
    if (items.empty()) return unexpected("an expression");
    if (items.size() == 1 && !comma) return std::move(items[0]);
    auto t = node(ExprKind::tuple, pos);
    t->args = std::move(items);
    return t;
  }

  Result<ExprPtr> parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    LLMSVC_RETURN_IF_ERROR(check_depth());
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  Result<ExprPtr> parse_condexpr() {
    auto e = parse_or();
    if (!e.ok()) return e;
    ExprPtr expr = std::move(e).value();
    while (is_name("if")) {
      const Pos pos = cur().pos;
      advance();
      auto cond = parse_or();
      if (!cond.ok()) return cond;
      auto c = node(ExprKind::cond, pos);
      c->args.push_back(std::move(cond).value());
      c->args.push_back(std::move(expr));
      if (is_name("else")) {
        advance();
        auto other = parse_condexpr();
        if (!other.ok()) return other;
        c->args.push_back(std::move(other).value());
      } else {
        c->args.push_back(nullptr);
      }
      expr = std::move(c);
    }
    return expr;
  }

  using SubParser = Result<ExprPtr> (Parser::*)();

  // left (kw right)* for the keyword operators and / or.
  Result<ExprPtr> parse_logic(const char* kw, ExprKind kind, SubParser sub) {
    auto l = (this->*sub)();
    if (!l.ok()) return l;
    ExprPtr left = std::move(l).value();
    while (is_name(kw)) {
      const Pos pos = cur().pos;
      advance();
      auto r = (this->*sub)();
      if (!r.ok()) return r;
      auto n = node(kind, pos);
      n->args.push_back(std::move(left));
      n->args.push_back(std::move(r).value());
      left = std::move(n);
    }
    return left;
  }

  Result<ExprPtr> parse_or() { return parse_logic("or", ExprKind::logic_or, &Parser::parse_and); }
  Result<ExprPtr> parse_and() { return parse_logic("and", ExprKind::logic_and, &Parser::parse_not); }

  Result<ExprPtr> parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      LLMSVC_RETURN_IF_ERROR(check_depth());
      const Pos pos = cur().pos;
      advance();
      auto inner = parse_not();
      if (!inner.ok()) return inner;
      auto n = node(ExprKind::logic_not, pos);
      n->args.push_back(std::move(inner).value());
      return n;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    const Pos pos = cur().pos;
    auto first = parse_math1();
    if (!first.ok()) return first;
    ExprPtr cmp;
    while (true) {
      static constexpr std::pair<std::string_view, Op> kOps[] = {
          {"==", Op::eq}, {"!=", Op::ne}, {"<", Op::lt}, {"<=", Op::le}, {">", Op::gt}, {">=", Op::ge}};
      const auto* hit = std::find_if(std::begin(kOps), std::end(kOps),
                                     [&](const auto& o) { return cur().kind == Tok::op && cur().text == o.first; });
      Op op = hit != std::end(kOps) ? hit->second : Op::in;
      if (hit == std::end(kOps) && is_name("not") && peek().kind == Tok::name && peek().text == "in") {
        op = Op::not_in;
        advance();
      } else if (hit == std::end(kOps) && !is_name("in")) {
        break;
      }
      advance();
      auto rhs = parse_math1();
      if (!rhs.ok()) return rhs;
      if (!cmp) {
        cmp = node(ExprKind::compare, pos);
        cmp->args.push_back(std::move(first).value());
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(rhs).value());
    }
    if (cmp) return cmp;
    return first;
  }

  // left (op right)* over the operators in `ops`.
  Result<ExprPtr> parse_binary(std::initializer_list<std::pair<std::string_view, Op>> ops, SubParser sub) {
    auto l = (this->*sub)();
    if (!l.ok()) return l;
    ExprPtr left = std::move(l).value();
    while (cur().kind == Tok::op) {
      const Op* found = nullptr;
      for (const auto& [text, op] : ops) {
        if (cur().text == text) found = &op;
      }
      if (!found) break;
      const Pos pos = cur().pos;
      const Op op = *found;
      advance();
      auto r = (this->*sub)();
      if (!r.ok()) return r;
      auto n = node(ExprKind::binary, pos);
      n->op = op;
      n->args.push_back(std::move(left));
      n->args.push_back(std::move(r).value());
      left = std::move(n);
    }
    return left;
  }

  Result<ExprPtr> parse_math1() { return parse_binary({{"+", Op::add}, {"-", Op::sub}}, &Parser::parse_concat); }
  Result<ExprPtr> parse_concat() { return parse_binary({{"~", Op::concat}}, &Parser::parse_math2); }
  Result<ExprPtr> parse_math2() {
    return parse_binary({{"*", Op::mul}, {"/", Op::div}, {"//", Op::floordiv}, {"%", Op::mod}}, &Parser::parse_pow);
  }
  Result<ExprPtr> parse_pow() { return parse_binary({{"**", Op::pow}}, &Parser::parse_unary_filtered); }
  Result<ExprPtr> parse_unary_filtered() { return parse_unary(true); }

  Result<ExprPtr> parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    LLMSVC_RETURN_IF_ERROR(check_depth());
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto n = node(ExprKind::unary, cur().pos);
      n->op = cur().text == "-" ? Op::neg : Op::pos;
      advance();
      auto inner = parse_unary(false);
      if (!inner.ok()) return inner;
      n->args.push_back(std::move(inner).value());
      e = std::move(n);
    } else {
      auto p = parse_primary();
      if (!p.ok()) return p;
      e = std::move(p).value();
    }
    auto post = parse_postfix(std::move(e));
    if (!post.ok() || !with_filter) return post;
    return parse_filter_expr(std::move(post).value());
  }

  Result<ExprPtr> parse_primary() {
    const Token& t = cur();
    const Pos pos = t.pos;
    if (t.kind == Tok::name) {
      auto e = node(ExprKind::literal, pos);
      if (t.text == "true" || t.text == "True") e->value = Value(true);
      else if (t.text == "false" || t.text == "False") e->value = Value(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = ExprKind::name;
        e->name = t.text;
        for (Stmt* m : macros_) {
          m->uses_varargs |= t.text == "varargs";
          m->uses_kwargs |= t.text == "kwargs";
          m->uses_caller |= t.text == "caller";
        }
      }
      advance();
      return e;
    }
    if (t.kind == Tok::string) {
      std::string s;
      while (cur().kind == Tok::string) {  // adjacent literals concatenate
        s += cur().text;
        advance();
      }
      auto e = node(ExprKind::literal, pos);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == Tok::integer || t.kind == Tok::floating) {
      auto e = node(ExprKind::literal, pos);
      e->value = t.number;
      advance();
      return e;
    }
    if (is_op("(")) {
      advance();
      if (is_op(")")) {
        advance();
        return node(ExprKind::tuple, pos);
      }
      auto inner = parse_tuple(true);
      if (!inner.ok()) return inner;
      LLMSVC_RETURN_IF_ERROR(expect_op(")"));
      return inner;
    }
    if (is_op("[") || is_op("{")) return parse_collection(pos, is_op("{"));
    return unexpected("an expression");
  }

  // [a, b, ...] or {k: v, ...}, a trailing comma allowed.
  Result<ExprPtr> parse_collection(Pos pos, bool dict) {
    advance();
    auto n = node(dict ? ExprKind::dict : ExprKind::list, pos);
    const std::string_view close = dict ? "}" : "]";
    while (!is_op(close)) {
      if (!n->args.empty()) {
        LLMSVC_RETURN_IF_ERROR(expect_op(","));
        if (is_op(close)) break;
      }
      auto item = parse_expression(true);
      if (!item.ok()) return item;
      n->args.push_back(std::move(item).value());
      if (dict) {
        LLMSVC_RETURN_IF_ERROR(expect_op(":"));
        auto v = parse_expression(true);
        if (!v.ok()) return v;
        n->args.push_back(std::move(v).value());
      }
    }
    advance();
    return n;
  }

  // What follows a primary: `.name`, `[...]` and calls (postfix), or filters, tests and
  // calls (after unary minus, as jinja2 splits them).
  Result<ExprPtr> parse_trailers(ExprPtr e, bool filters) {
    while (true) {
      Result<ExprPtr> next = ExprPtr{};
      if (!filters && (is_op(".") || is_op("["))) next = parse_subscript(std::move(e));
      else if (filters && is_op("|")) next = parse_filter_chain(std::move(e), true, /*single=*/true);
      else if (filters && is_name("is")) next = parse_test(std::move(e));
      else if (is_op("(")) next = parse_call(std::move(e));
      else return e;
      if (!next.ok()) return next;
      e = std::move(next).value();
    }
  }
  Result<ExprPtr> parse_postfix(ExprPtr e) { return parse_trailers(std::move(e), false); }
  Result<ExprPtr> parse_filter_expr(ExprPtr e) { return parse_trailers(std::move(e), true); }

  Result<ExprPtr> parse_subscript(ExprPtr target) {
    const Pos pos = cur().pos;
    if (is_op(".")) {
      advance();
      if (cur().kind == Tok::name) {
        auto a = node(ExprKind::attr, pos);
        a->name = cur().text;
        a->args.push_back(std::move(target));
        advance();
        return a;
      }
      if (cur().kind == Tok::integer) {
        auto i = node(ExprKind::index, pos);
        i->args.push_back(std::move(target));
        auto lit = node(ExprKind::literal, cur().pos);
        lit->value = cur().number;
        i->args.push_back(std::move(lit));
        advance();
        return i;
      }
      return unexpected("an attribute name");
    }
    advance();  // [
    ExprPtr parts[3];
    bool is_slice = false;
    for (int k = 0; k < 3; ++k) {
      if (k > 0) {
        if (!is_op(":")) break;
        advance();
        is_slice = true;
      }
      if (!is_op(":") && !is_op("]")) {
        auto e = parse_expression(true);
        if (!e.ok()) return e;
        parts[k] = std::move(e).value();
      }
      if (k == 0 && !is_op(":")) break;
    }
    LLMSVC_RETURN_IF_ERROR(expect_op("]"));
    auto n = node(is_slice ? ExprKind::slice : ExprKind::index, pos);
    n->args.push_back(std::move(target));
    if (!is_slice && !parts[0]) return error(cur(), "empty subscript");
    for (int k = 0; k < (is_slice ? 3 : 1); ++k) n->args.push_back(std::move(parts[k]));
    return n;
  }

  // (args, name=value, ...) into e->args (after those already there) and e->kwargs.
  Status parse_call_args(Expr& e) {
    LLMSVC_RETURN_IF_ERROR(expect_op("("));
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        LLMSVC_RETURN_IF_ERROR(expect_op(","));
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) return error(cur(), "unsupported *args / **kwargs in a call", Code::unsupported);
      if (cur().kind == Tok::name && peek().kind == Tok::op && peek().text == "=") {
        std::string key = cur().text;
        advance();
        advance();
        auto v = parse_expression(true);
        if (!v.ok()) return v.status();
        e.kwargs.emplace_back(std::move(key), std::move(v).value());
        continue;
      }
      if (!e.kwargs.empty()) return error(cur(), "positional argument after keyword argument");
      auto v = parse_expression(true);
      if (!v.ok()) return v.status();
      e.args.push_back(std::move(v).value());
    }
    advance();
    return Status::Ok();
  }

  Result<ExprPtr> parse_call(ExprPtr callee) {
    auto c = node(ExprKind::call, cur().pos);
    c->args.push_back(std::move(callee));
    LLMSVC_RETURN_IF_ERROR(parse_call_args(*c));
    return c;
  }

  // `| name(args) | name ...` applied to target (null: the filter block's body). With
  // `single`, only one filter is taken (parse_filter_expr loops over the rest).
  Result<ExprPtr> parse_filter_chain(ExprPtr target, bool leading_bar = true, bool single = false) {
    bool first = true;
    while (true) {
      if (leading_bar || !first) {
        if (!is_op("|")) break;
        advance();
      }
      first = false;
      auto f = node(ExprKind::filter, cur().pos);
      auto n = expect_name("a filter name");
      if (!n.ok()) return n.status();
      f->name = std::move(n).value();
      while (is_op(".") && peek().kind == Tok::name) {  // dotted filter names
        advance();
        f->name += "." + cur().text;
        advance();
      }
      f->args.push_back(std::move(target));
      if (is_op("(")) LLMSVC_RETURN_IF_ERROR(parse_call_args(*f));
      target = std::move(f);
      if (single) break;
    }
    return target;
  }

  Result<ExprPtr> parse_test(ExprPtr target) {
    auto t = node(ExprKind::test, cur().pos);
    advance();  // is
    if (is_name("not")) {
      t->negated = true;
      advance();
    }
    auto n = expect_name("a test name");
    if (!n.ok()) return n.status();
    t->name = std::move(n).value();
    t->args.push_back(std::move(target));
    if (is_op("(")) {
      LLMSVC_RETURN_IF_ERROR(parse_call_args(*t));
    } else if ((cur().kind == Tok::name || cur().kind == Tok::string || cur().kind == Tok::integer ||
                cur().kind == Tok::floating || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) return error(cur(), "tests cannot be chained with 'is'");
      auto arg = parse_primary();
      if (!arg.ok()) return arg;
      auto post = parse_postfix(std::move(arg).value());
      if (!post.ok()) return post;
      t->args.push_back(std::move(post).value());
    }
    return t;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  uint32_t max_depth_;
  uint32_t depth_ = 0;
  uint32_t loop_depth_ = 0;
  std::vector<Stmt*> macros_;  // macros / call blocks being parsed
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens, uint32_t max_depth) { return Parser(tokens, max_depth).run(); }

}  // namespace llmsvc::jinja
