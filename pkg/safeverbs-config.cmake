# safeverbs-config.cmake: find_package(safeverbs [VERSION] [COMPONENTS rdmacm]).
# Gives the INTERFACE target safeverbs::safeverbs (include directory, libibverbs, threads) and,
# with the component rdmacm (or whenever librdmacm is found), safeverbs::rdmacm: the same plus
# librdmacm and the definition SAFEVERBS_RDMACM. Relocatable: paths are relative to this file
# (installed as <prefix>/share/cmake/safeverbs/).
get_filename_component(_safeverbs_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_library(SAFEVERBS_IBVERBS_LIBRARY NAMES ibverbs)
find_path(SAFEVERBS_IBVERBS_INCLUDE_DIR NAMES infiniband/verbs.h)
if(NOT SAFEVERBS_IBVERBS_LIBRARY OR NOT SAFEVERBS_IBVERBS_INCLUDE_DIR)
    set(safeverbs_FOUND FALSE)
    set(safeverbs_NOT_FOUND_MESSAGE "safeverbs needs libibverbs (Debian: libibverbs-dev)")
    return()
endif()
if(NOT TARGET safeverbs::safeverbs)
    add_library(safeverbs::safeverbs INTERFACE IMPORTED)
    set_target_properties(safeverbs::safeverbs PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${_safeverbs_prefix}/include;${SAFEVERBS_IBVERBS_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES "${SAFEVERBS_IBVERBS_LIBRARY};Threads::Threads")
endif()
find_library(SAFEVERBS_RDMACM_LIBRARY NAMES rdmacm)
if(SAFEVERBS_RDMACM_LIBRARY AND NOT TARGET safeverbs::rdmacm)
    add_library(safeverbs::rdmacm INTERFACE IMPORTED)
    set_target_properties(safeverbs::rdmacm PROPERTIES
        INTERFACE_COMPILE_DEFINITIONS "SAFEVERBS_RDMACM"
        INTERFACE_LINK_LIBRARIES "safeverbs::safeverbs;${SAFEVERBS_RDMACM_LIBRARY}")
endif()
set(safeverbs_safeverbs_FOUND TRUE)
set(safeverbs_rdmacm_FOUND FALSE)
if(TARGET safeverbs::rdmacm)
    set(safeverbs_rdmacm_FOUND TRUE)
endif()
foreach(_c ${safeverbs_FIND_COMPONENTS})
    if(NOT safeverbs_${_c}_FOUND AND safeverbs_FIND_REQUIRED_${_c})
        set(safeverbs_FOUND FALSE)
        set(safeverbs_NOT_FOUND_MESSAGE "safeverbs component ${_c} not found (rdmacm needs librdmacm-dev)")
    endif()
endforeach()
unset(_safeverbs_prefix)
