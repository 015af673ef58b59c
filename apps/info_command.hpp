// `crescent info`: what this binary was built with.
#pragma once

namespace crescent::cli {

int info_command();

} // namespace crescent::cli
