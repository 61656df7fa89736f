// SPDX-License-Identifier: BSD-2-Clause
// exanet-params: exanet's runtime parameters, from the provider's own table
// (prov/exanet/src/fi/param_table.hpp), so that nothing that lists them is written by hand.
//
//   exanet-params            every FI_EXANET_* variable: type, default, bounds, meaning, and the
//                            value this environment sets, if any
//   exanet-params man        fi_exanet(7)'s RUNTIME PARAMETERS section, in roff
//   exanet-params markdown   the README's parameter table
//   exanet-params version    the version, from CMake's project(VERSION)
//
// util/param_docs.sh compares the man page and the README with this output (ctest docs.params)
// and rewrites them (the update-docs target).
#include <rdma/fi_ext_exanet.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fi/param_table.hpp"

namespace {

using exanet::fi::g_params;
using exanet::fi::param_bounds_text;
using exanet::fi::param_spec;
using exanet::fi::param_type_name;
using exanet::fi::param_variable;

/// Plain text as roff: a backslash is doubled and a hyphen becomes a minus sign.
std::string roff(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  return out;
}

/// One sentence per line, as the rest of fi_exanet(7) is written (". " before a capital or a
/// digit).
std::string sentences(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '.' && i + 2 < text.size() && text[i + 1] == ' ' &&
        ((text[i + 2] >= 'A' && text[i + 2] <= 'Z') || (text[i + 2] >= '0' && text[i + 2] <= '9'))) {
      out += '\n';
      ++i;
    }
  }
  return out;
}

std::string capitalized(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

void print_man() {
  std::puts(".SH RUNTIME PARAMETERS");
  std::puts("Every parameter is listed, with its type, default and bounds, by \\fBexanet\\-params\\fR "
            "(installed with the provider) and by \\fBfi_info \\-e\\fR (libfabric 1.17 writes NUL "
            "bytes there: \\fBfi_info \\-e | grep \\-a FI_EXANET\\fR).");
  std::puts("A value outside its bounds is clamped to the nearest bound, and a text that is not a "
            "number leaves the default; either is logged at \\fBFI_LOG_LEVEL\\fR=warn, once per "
            "parameter and value.");
  std::puts("At \\fBFI_LOG_LEVEL\\fR=info the provider logs the configuration in force after the "
            "bounds (version, protocol family, size thresholds, DMA engine, the sizes of the "
            "segment's parts, queue bounds), once and again whenever it changes, and every "
            "\\fBfi_getinfo\\fR refusal with its reason (\\fBFI_LOG_PROV\\fR=exanet keeps "
            "other providers' messages out).");
  std::puts("This section is generated from the provider's parameter table "
            "(\\fIprov/exanet/src/fi/param_table.hpp\\fR).");
  for (const param_spec& p : g_params) {
    std::puts(".TP");
    std::printf(".B %s\n", roff(param_variable(p)).c_str());
    std::printf("%s\n", roff(sentences(p.help)).c_str());
    std::printf("%s: %s.\n", capitalized(std::string(param_type_name(p.type))).c_str(),
                roff(param_bounds_text(p)).c_str());
    if (!p.manual.empty()) std::printf("%s\n", std::string(p.manual).c_str());
  }
}

/// Markdown table cell: a '|' would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

void print_markdown() {
  std::puts("| Variable | Type | Default; bounds | Meaning |");
  std::puts("|---|---|---|---|");
  for (const param_spec& p : g_params)
    std::printf("| `%s` | %s | %s | %s |\n", param_variable(p).c_str(),
                std::string(param_type_name(p.type)).c_str(), cell(param_bounds_text(p)).c_str(),
                cell(p.help).c_str());
}

void print_list() {
  std::printf("exanet %s: runtime parameters (fi_exanet(7), RUNTIME PARAMETERS)\n\n",
              FI_EXANET_VERSION_STRING);
  for (const param_spec& p : g_params) {
    const std::string var = param_variable(p);
    std::printf("%s (%s; %s)\n", var.c_str(), std::string(param_type_name(p.type)).c_str(),
                param_bounds_text(p).c_str());
    if (const char* set = std::getenv(var.c_str())) std::printf("    set here: %s\n", set);
    // the help, wrapped at 96 columns
    std::string_view rest = p.help;
    while (!rest.empty()) {
      std::size_t cut = rest.size();
      if (cut > 92) {
        cut = rest.rfind(' ', 92);
        if (cut == std::string_view::npos) cut = 92;
      }
      std::printf("    %.*s\n", static_cast<int>(cut), rest.data());
      rest.remove_prefix(cut);
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view what = argc > 1 ? argv[1] : "list";
  if (argc > 2 || what == "-h" || what == "--help") {
    std::fprintf(stderr, "usage: exanet-params [list|man|markdown|version]\n");
    return argc > 2 ? 2 : 0;
  }
  if (what == "list")
    print_list();
  else if (what == "man")
    print_man();
  else if (what == "markdown")
    print_markdown();
  else if (what == "version")
    std::printf("%d.%d.%d\n", FI_EXANET_VERSION_MAJOR, FI_EXANET_VERSION_MINOR,
                FI_EXANET_VERSION_PATCH);
  else {
    std::fprintf(stderr, "exanet-params: unknown command \"%s\" (list, man, markdown, version)\n",
                 argv[1]);
    return 2;
  }
  return 0;
}
