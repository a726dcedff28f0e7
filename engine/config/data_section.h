// The `data` config section: which data module (--data=fashion_mnist, the default, or
// --data=text) and its options as --data.<key> flags. Each class's keys and defaults come from
// its options struct (to_json), so the CLI cannot drift from the library; the struct's
// from_json/validate judge the values.
#pragma once
#include <memory>

#include <yaml-cpp/yaml.h>

#include "engine/config/class_section.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/text_data.h"

namespace tandem {

// fashion_mnist (data::FashionMNISTOptions; the CLI's batch_size default is 256) and text
// (data::TextDataOptions).
const std::vector<ClassSpec>& data_classes();
SectionSpec data_section();
// Fills the chosen class's defaults in config["data"]; ConfigError for options it does not take.
void resolve_data_section(YAML::Node& config);

// The chosen class's name as data_classes() spells it ("fashion_mnist" when none is chosen).
std::string data_class_of(const YAML::Node& config);
// The options a resolved config's `data` section describes, for each class; ConfigError for
// invalid values or when the section names the other class.
data::FashionMNISTOptions data_options_from_config(const YAML::Node& config);
data::TextDataOptions text_data_options_from_config(const YAML::Node& config);
// --data=text's default corpus, the King James Bible from Debian's bible-kjv (`bible -f
// Gen1:1-Rev22:21`, 4.4 MB), cached at $XDG_CACHE_HOME/tandem/kjv.txt (else ~/.cache/tandem/).
std::string default_corpus_path();
// The default corpus' path, writing it first (atomically) from `bible` when it is not there.
// DataError when `bible` is missing (scripts/install-deps.sh --data installs bible-kjv).
std::string ensure_default_corpus();

// The batch size of whichever class is chosen.
int64_t data_batch_size(const YAML::Node& config);

}  // namespace tandem
