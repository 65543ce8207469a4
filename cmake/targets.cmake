# SPDX-License-Identifier: Apache-2.0
# Walks the build's targets and finds the Highway-dispatched sources among them.

# llmsvc_targets_under(DIR OUT): every target defined in DIR or below it.
function(llmsvc_targets_under dir out)
  get_property(found DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    llmsvc_targets_under(${sub} below)
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# llmsvc_dispatch_sources(TARGET OUT): TARGET's C++ sources that include hwy/foreach_target.h,
# which compile once per SIMD target by including themselves again.
function(llmsvc_dispatch_sources target out)
  get_target_property(dir ${target} SOURCE_DIR)
  get_target_property(srcs ${target} SOURCES)
  set(found)
  foreach(src IN LISTS srcs)
    if(NOT IS_ABSOLUTE "${src}")
      set(src "${dir}/${src}")
    endif()
    if(src MATCHES "\\.cpp$" AND EXISTS "${src}")
      file(STRINGS "${src}" dispatch REGEX "hwy/foreach_target\\.h")
      if(dispatch)
        list(APPEND found "${src}")
      endif()
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
