// Included by its .cpp from its own folder: allowed.
#pragma once
