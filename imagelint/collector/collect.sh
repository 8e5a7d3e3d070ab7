# imagelint collector: what the instance runs. It only answers; imagelint analyses at home.
#
#   sh collect.sh WORKDIR        (WORKDIR/plan.txt says what to collect; never executed from /tmp)
#
# Uses a POSIX shell, coreutils (stat, readlink, sort, comm, date, cat, tr, wc), tar, gzip when there
# is one, systemctl and what the kernel exposes (/proc, /sys/fs/cgroup). No Python, no install, no
# network: the caller uploads WORKDIR/bundle.tar.gz (or bundle.tar) with curl.
#
# plan.txt, one directive a line:
#   root DIR          collect from DIR instead of / (tests)
#   limit NAME BYTES  file (content cap per file), journal (per journal file), total (all content),
#                     entries (paths listed in all)
#   show 1            record `systemctl show` of every service (at the start and, with a soak, the end)
#   soak CS EVERY     sample memory cgroups every EVERY centiseconds for CS centiseconds
#   C GLOB            matches with their content      M GLOB  matches, metadata only
#   T GLOB            matches and all below, metadata  R GLOB  matches and all below, with content
#   J GLOB            as R, with the journal cap       U       paths named in the collected unit files
#   S FILE            FILE with content, and the files its sshd `Include` lines name
#   N GLOB            not collected by design (what a boot creates under /run): read as absent
# Bundle (tar): ./<image path> entries (directories, symlinks, regular files with content) and
# imagelint/ (manifest.txt, members.txt, live/, soak/). Regular files whose content was not collected, and
# special files, are described in manifest.txt as `stat MODE UID GID SIZE REASON PATH`.
set -u
W=${1:?usage: sh collect.sh WORKDIR}
case $W in /*) ;; *) W=$PWD/$W ;; esac  # the walks change directory
LC_ALL=C
export LC_ALL
NL='
'
B=$W/stage
M=$B/imagelint
mkdir -p "$M/live" "$M/soak" || exit 94
MAN=$M/manifest.txt
ROOT=
FILE_CAP=16777216
JOURNAL_CAP=268435456
TOTAL_CAP=536870912
ENTRY_CAP=300000
SHOW=0
SOAK_CS=0
EVERY_CS=500
TOTAL=0
ENTRIES=0
BADNAMES=0
for f in want.c want.m want.j tar.lst units.lst sshd.lst links; do : > "$W/$f"; done
# lists are written through descriptors opened once (3 the manifest, 4 want.m, 5 the tar list): a
# `>>` per line is an open and a close per path
exec 3>> "$MAN" 4>> "$W/want.m" 5>> "$W/tar.lst"
note() { printf '%s\n' "$*" >&3; }
# phase NAME: where the run is (uptime) and the CPU it used so far (the shell's and its children's,
# from `times`): what the collector costs the host, and where
phase() {
    times > "$W/times"
    { read -r _t1; read -r _t2; } < "$W/times"
    read -r _up _idle < /proc/uptime 2> /dev/null || _up=-
    note "phase $1 $_up $_t1 $_t2"
}

# -- paths ---------------------------------------------------------------------------------------

# chain PATH LIST: every component of image path PATH goes to want.m (metadata), links followed as
# the kernel does at the root (absolute targets restart at the root, '..' stops there, 40 links at
# most); the resolved path goes to LIST when it exists.
chain() {
    CANON=
    _rest=$1
    _cur=
    _links=0
    while :; do
        while [ "${_rest#/}" != "$_rest" ]; do _rest=${_rest#/}; done
        [ -n "$_rest" ] || break
        case $_rest in
            */*) _c=${_rest%%/*}; _rest=${_rest#*/} ;;
            *) _c=$_rest; _rest= ;;
        esac
        case $_c in
            .) continue ;;
            ..) _cur=${_cur%/*}; continue ;;
        esac
        _cur=$_cur/$_c
        if [ -L "$ROOT$_cur" ]; then
            printf '%s\n' "$_cur" >&4
            _links=$((_links + 1))
            if [ "$_links" -gt 40 ]; then note "incomplete symlink-loop $1"; return 1; fi
            target "$_cur" || return 1
            _t=$T
            case $_t in *"$NL"*) BADNAMES=$((BADNAMES + 1)); return 1 ;; esac  # a list holds a path a line
            case $_t in
                /*) _cur= ;;
                *) _cur=${_cur%/*} ;;
            esac
            _rest=$_t${_rest:+/$_rest}
        elif [ -e "$ROOT$_cur" ]; then
            printf '%s\n' "$_cur" >&4
        else
            note "absent $_cur"
            return 1
        fi
    done
    CANON=${_cur:-/}
    printf '%s\n' "$CANON" >> "$2"
}

# Link targets. chain asks for each link's target with `target`, which takes it from BATCH (read
# ahead by `prefetch`, in the order chain asks: lines PATH//TARGET, a canonical path never holding
# '//'), else from the kept targets of top-level links (/bin, /lib...: every path under them asks),
# else from one `readlink`.
BATCH=
MULTI=1  # readlink takes several paths (GNU); 0 once it did not
target() {  # target PATH: the target of link PATH (canonical) in T; 1 when it cannot be read
    case $BATCH in
        "$1//"*)
            _r=${BATCH#"$1//"}
            T=${_r%%"$NL"*}
            BATCH=${_r#*"$NL"}
            return 0
            ;;
    esac
    _k=
    case ${1#/} in
        '' | *[!A-Za-z0-9_]*) ;;
        *) _k=_L_${1#/}; eval "[ -z \"\${$_k+x}\" ]" || { eval "T=\$$_k"; return 0; } ;;
    esac
    T=$(readlink -- "$ROOT$1") || return 1
    [ -z "$_k" ] || eval "$_k=\$T"
}

# prefetch LIST: the targets of the links LIST names (canonical paths, one a line, in the order chain
# will ask for them) read into BATCH, up to 256 a `readlink`; nothing when readlink takes one path
# only, or a target holds a newline (they are then read one at a time)
prefetch() {
    BATCH=
    [ "$MULTI" = 1 ] && [ -s "$1" ] || return 0
    _from=$1
    set --
    while IFS= read -r _l; do
        set -- "$@" "$ROOT$_l"
        [ "$#" -lt 256 ] || { prefetch_some "$@" || return 0; set --; }
    done < "$_from"
    [ "$#" -eq 0 ] || prefetch_some "$@"
}
prefetch_some() {
    _out=$(readlink -- "$@" 2> /dev/null) || { MULTI=0; BATCH=; return 1; }
    _got=
    for _p; do
        case $_out in
            *"$NL"*) _t=${_out%%"$NL"*}; _out=${_out#*"$NL"} ;;
            *) _t=$_out; _out= ;;
        esac
        [ -n "$_t" ] || { MULTI=0; BATCH=; return 1; }
        _got=$_got${_p#"$ROOT"}//$_t$NL
    done
    [ -z "$_out" ] || { MULTI=0; BATCH=; return 1; }
    BATCH=$BATCH$_got
}

# expand GLOB: the existing image paths GLOB matches (shell globbing: '*' skips leading dots, as
# imagelint's own glob), one per line in $W/matches
expand() {
    : > "$W/matches"
    _old=$IFS
    IFS=
    for _p in $ROOT$1; do
        if [ -e "$_p" ] || [ -L "$_p" ]; then
            case $_p in *"$NL"*) BADNAMES=$((BADNAMES + 1)); continue ;; esac
            printf '%s\n' "${_p#"$ROOT"}" >> "$W/matches"
        fi
    done
    IFS=$_old
}

# esc TEXT: TEXT as printf prints it when it is part of the format (% and \ doubled), in E
esc() {
    _in=$1
    E=
    while :; do
        case $_in in
            *[%\\]*) ;;
            *) E=$E$_in; return 0 ;;
        esac
        _h=${_in%%[%\\]*}
        _in=${_in#"$_h"}
        _c=${_in%"${_in#?}"}
        _in=${_in#?}
        E=$E$_h$_c$_c
    done
}

# walk DIR LIST FOLLOW: every entry below canonical directory DIR to LIST, breadth first (the queue is
# one file, read as it grows), never through a link; with FOLLOW=1 links go to want.m and their
# targets are chained into LIST. A directory is listed by globbing in it and its entries written in
# one go; one by one only with FOLLOW=1, a name holding a newline, or at the entry cap.
walk() {
    _list=$2
    _follow=$3
    _saved=$BATCH
    printf '%s\n' "$1" > "$W/queue"
    : > "$W/links"
    exec 6>> "$W/queue" 7>> "$_list"
    _full=
    _old=$IFS
    IFS=
    while read -r _d; do
        _b=${_d%/}
        if [ -n "$_full" ]; then note "incomplete entries $_d"; continue; fi
        case $_b in
            /proc | /sys | /dev) note "incomplete virtual-filesystem $_d"; continue ;;
        esac
        if ! cd -P -- "$ROOT$_b/" 2> /dev/null; then note "incomplete unreadable $_d"; continue; fi
        esc "$_b/"
        _pre=$E
        for _g in '*' '.[!.]*' '..?*'; do
            set -- $_g
            [ -e "$1" ] || [ -L "$1" ] || continue  # no match: the pattern itself
            case $_follow$* in
                1* | *"$NL"*) ;;
                *)
                    if [ $((ENTRIES + $#)) -le "$ENTRY_CAP" ]; then
                        ENTRIES=$((ENTRIES + $#))
                        printf "$_pre%s\n" "$@" >&7
                        set -- $_g/
                        [ -d "$1" ] || continue
                        for _e; do [ -L "${_e%/}" ] || printf "$_pre%s\n" "${_e%/}" >&6; done
                        continue
                    fi
                    ;;
            esac
            for _e; do
                case $_e in *"$NL"*) BADNAMES=$((BADNAMES + 1)); continue ;; esac
                ENTRIES=$((ENTRIES + 1))
                if [ "$ENTRIES" -gt "$ENTRY_CAP" ]; then
                    note "incomplete entries $_d"
                    _full=1
                    break 2
                fi
                if [ -L "$_e" ]; then
                    printf "$_pre%s\n" "$_e" >&4
                    [ "$_follow" = 1 ] && printf "$_pre%s\n" "$_e" >> "$W/links"
                elif [ -d "$_e" ]; then
                    printf "$_pre%s\n" "$_e" >&4
                    printf "$_pre%s\n" "$_e" >&6
                else
                    printf "$_pre%s\n" "$_e" >&7
                fi
            done
        done
    done < "$W/queue"
    IFS=$_old
    exec 6>&- 7>&-
    cd /
    prefetch "$W/links"
    while IFS= read -r _lk; do chain "$_lk" "$_list"; done < "$W/links"
    BATCH=$_saved
}

# prefetch_matches: the targets of the links among the glob's matches read ahead (prefetch), each
# under the name chain will ask for (its directory's links resolved once per directory)
prefetch_matches() {
    : > "$W/links"
    _pd=//
    _pc=//
    while IFS= read -r _m; do
        case /$_m/ in */./* | */../*) continue ;; esac
        _d=${_m%/*}
        if [ "$_d" != "$_pd" ]; then
            _pd=$_d
            _pc=//
            if [ -z "$_d" ]; then _pc=; elif chain "$_d" /dev/null; then _pc=${CANON%/}; fi
        fi
        [ "$_pc" != // ] && [ -L "$ROOT$_pc/${_m##*/}" ] && printf '%s\n' "$_pc/${_m##*/}" >> "$W/links"
    done < "$W/matches"
    prefetch "$W/links"
}

want() {  # want KIND GLOB (recorded as asked: what a missing path may be read as absent on)
    note "asked $1 $2"
    expand "$2"
    prefetch_matches
    while IFS= read -r _m; do
        case $1 in
            C | S) chain "$_m" "$W/want.c" ;;
            M) chain "$_m" "$W/want.m" ;;
            T | R | J)
                chain "$_m" "$W/want.m" || continue
                case $1 in T) _l=want.m; _f=0 ;; R) _l=want.c; _f=1 ;; *) _l=want.j; _f=1 ;; esac
                if [ -d "$ROOT$CANON" ]; then
                    [ "$1" = R ] && printf '%s\n' "$CANON" >> "$W/units.lst"
                    walk "$CANON" "$W/$_l" "$_f"
                else
                    printf '%s\n' "$CANON" >> "$W/$_l"
                fi
                ;;
        esac
    done < "$W/matches"
}

sshd_includes() {  # the files sshd's Include lines name (one level), with content
    [ -f "$ROOT$1" ] || return 0
    while read -r _kw _args; do
        case $_kw in
            [Ii][Nn][Cc][Ll][Uu][Dd][Ee])
                _old=$IFS
                IFS=' 	'
                set -f
                for _g in $_args; do
                    case $_g in /*) ;; *) _g=/etc/ssh/$_g ;; esac
                    set +f
                    want C "$_g"
                    set -f
                done
                set +f
                IFS=$_old
                ;;
        esac
    done < "$ROOT$1"
}

unit_refs() {  # absolute paths named in the collected unit files and drop-ins, metadata only
    : > "$W/units.txt"
    set --
    while IFS= read -r _dir; do
        for _u in "$ROOT$_dir"/* "$ROOT$_dir"/*.d/*.conf; do
            [ -f "$_u" ] || continue
            set -- "$@" "$_u"
            # a `cat` for many files (within any argument-size limit), one `tr` for all
            [ "$#" -lt 200 ] || { cat -- "$@" >> "$W/units.txt" 2> /dev/null; set --; }
        done
    done < "$W/units.lst"
    [ "$#" -eq 0 ] || cat -- "$@" >> "$W/units.txt" 2> /dev/null
    tr -s ' \t="'"'"';' '\n\n\n\n\n\n' < "$W/units.txt" > "$W/refs" 2> /dev/null
    _n=0
    sort -u "$W/refs" > "$W/refs.s"
    while IFS= read -r _r; do
        while :; do
            case $_r in [-@!+:\|]*) _r=${_r#?} ;; *) break ;; esac
        done
        case $_r in
            /*) ;;
            *) continue ;;
        esac
        case $_r in *'$'* | *'%'*) continue ;; esac
        _n=$((_n + 1))
        [ "$_n" -le 20000 ] || { note "incomplete unit-references"; break; }
        want M "$_r"
    done < "$W/refs.s"
}

# -- live state and soak samples -----------------------------------------------------------------

PROPS=Id,ActiveState,SubState,Result,NRestarts,ExecMainStatus,UnitFileState
show() {  # show NAME: one batched `systemctl show` of every loaded service
    {
        printf 'wall %s\n' "$(date +%s.%N)"
        if [ -d /run/systemd/system ]; then echo "booted 1"; else echo "booted 0"; fi
    } > "$M/live/$1.status"
    systemctl show --no-pager --all "--property=$PROPS" -- '*.service' > "$M/live/$1.txt" 2> "$W/show.err"
    printf 'rc %s\n' "$?" >> "$M/live/$1.status"
    printf 'returned %s\n' "$(date +%s.%N)" >> "$M/live/$1.status"
    _err=
    IFS= read -r _err < "$W/show.err" || true
    printf 'stderr %s\n' "${_err:-}" >> "$M/live/$1.status"
}

CG=/sys/fs/cgroup
V2=
V1MEM=
layout() {
    if [ -f "$CG/cgroup.controllers" ]; then V2=$CG; elif [ -f "$CG/unified/cgroup.controllers" ]; then V2=$CG/unified; fi
    if [ "$V2" != "$CG" ] && [ -d "$CG/memory" ]; then
        _real=$(readlink -f "$CG/memory")
        if [ -e "$_real/memory.usage_in_bytes" ] || [ -e "$_real/memory.limit_in_bytes" ]; then V1MEM=$_real; fi
    fi
    {
        echo "v2 ${V2:--}"
        if [ -n "$V2" ]; then printf 'controllers %s\n' "$(cat "$V2/cgroup.controllers")"; fi
        echo "v1memory ${V1MEM:--}"
        for _c in "$CG"/*; do [ -d "$_c" ] && [ ! -L "$_c" ] && printf 'mounted %s\n' "${_c##*/}"; done
    } > "$M/soak/layout"
}

count_dirs() {  # directories at and below $1, level by level (one glob a level)
    _old=$IFS
    IFS=
    _n=1
    _p=$1/*/
    while :; do
        set -- $_p
        [ -d "$1" ] || break
        _n=$((_n + $#))
        _p=$_p*/
    done
    IFS=$_old
    echo "$_n"
}

sample() {  # sample N
    _f=$M/soak/sample.$1
    {
        read -r _up _idle < /proc/uptime
        echo "uptime $_up"
        echo "wall $(date +%s.%N)"
        echo "@@ /proc/cgroups"
        cat /proc/cgroups
        if [ -n "$V1MEM" ]; then echo "@@ memdirs $(count_dirs "$V1MEM")"; fi
        if [ -n "$V2" ]; then
            echo "@@ cgroup.stat"
            cat "$V2/cgroup.stat"
            for _s in "$V2"/*/; do
                [ -f "${_s}cgroup.stat" ] || continue
                _s=${_s%/}
                echo "@@ subtree ${_s##*/}"
                cat "$_s/cgroup.stat"
            done
        fi
    } > "$_f" 2>> "$M/soak/errors"
}

probe() {  # probe NAME: time one read of every live memory cgroup's memory.stat
    _name=$1  # the glob below reuses the positional parameters
    _base=$V1MEM
    [ -n "$_base" ] || _base=$V2
    [ -n "$_base" ] || return 0
    : > "$W/probe.lst"
    _old=$IFS
    IFS=
    _pat=$_base/memory.stat
    while :; do
        set -- $_pat
        [ -e "$1" ] || break
        printf '%s\n' "$@" >> "$W/probe.lst"
        _pat=${_pat%memory.stat}*/memory.stat
    done
    IFS=$NL
    _files=$(cat "$W/probe.lst")
    read -r _u0 < /proc/uptime
    _t0=$(date +%s%N)
    times > "$W/times.before"  # not $(times): a command substitution is a subshell with its own times
    _bytes=$(cat $_files 2> "$W/probe.err" | wc -c)
    times > "$W/times.after"
    _t1=$(date +%s%N)
    read -r _u1 < /proc/uptime
    IFS=$_old
    {
        echo "uptime-start ${_u0%% *}"
        echo "uptime-end ${_u1%% *}"
        echo "cgroups $(wc -l < "$W/probe.lst")"
        echo "ns $((_t1 - _t0))"
        echo "bytes $_bytes"
        echo "errors $(wc -l < "$W/probe.err")"
        echo "times-before $(tr '\n' ' ' < "$W/times.before")"
        echo "times-after $(tr '\n' ' ' < "$W/times.after")"
    } > "$M/soak/probe.$_name"
}

uptime_cs() {
    read -r _up _idle < /proc/uptime
    _i=${_up%.*}
    _fr=${_up#*.}00
    _fr=${_fr%"${_fr#??}"}
    echo $((_i * 100 + ${_fr#0}))
}

# The per-CPU reader: /proc/stat's cpuN lines about every PERIOD centiseconds to soak/cpu, each read
# after a `t UPTIME` line, until WORKDIR/cpu.stop exists. Under bash it waits with `read -t` on a FIFO
# nobody writes to: no process is started per read (under sh, one `sleep` per read).
CPU_READER='
W=$1 PERIOD=$2 MODE=$3
SECS=$((PERIOD / 100)).$(printf %02d $((PERIOD % 100)))
[ "$MODE" = bash ] && exec 3<> "$W/tick"
echo "mode $MODE"
echo "period $PERIOD"
while [ ! -e "$W/cpu.stop" ]; do
    read -r _up _idle < /proc/uptime
    echo "t $_up"
    while read -r _l; do
        case $_l in cpu[0-9]*) echo "$_l" ;; cpu*) ;; *) break ;; esac
    done < /proc/stat
    if [ "$MODE" = bash ]; then read -r -t "$SECS" -u 3 _x; else sleep "$SECS"; fi
done
times > "$W/cpu.times"
'
CPU_PID=
cpu_start() {  # the reader in the background; reads widened so that CPUs x reads stay under 1,000,000
    [ -r /proc/stat ] || { echo "no /proc/stat" > "$M/soak/cpu.error"; return 0; }
    _cpus=0
    while read -r _l; do
        case $_l in cpu[0-9]*) _cpus=$((_cpus + 1)) ;; cpu*) ;; *) break ;; esac
    done < /proc/stat
    _period=$(((SOAK_CS * _cpus + 999999) / 1000000))
    [ "$_period" -ge 10 ] || _period=10
    rm -f "$W/cpu.stop" "$W/tick" "$W/cpu.times"
    if command -v bash > /dev/null 2>&1 && mkfifo "$W/tick" 2> /dev/null; then _mode=bash; else _mode=sh; fi
    if [ "$_mode" = bash ]; then
        bash -c "$CPU_READER" cpu-reader "$W" "$_period" bash > "$M/soak/cpu" 2>> "$M/soak/errors" &
    else
        sh -c "$CPU_READER" cpu-reader "$W" "$_period" sh > "$M/soak/cpu" 2>> "$M/soak/errors" &
    fi
    CPU_PID=$!
}
cpu_stop() {
    [ -n "$CPU_PID" ] || return 0
    : > "$W/cpu.stop"
    wait "$CPU_PID"
}

# nics: each network interface with a device, its device's name and MSI IRQs (as /sys/class/net shows)
nics() {
    for _d in /sys/class/net/*; do
        [ -e "$_d/device" ] || continue
        _dev=$(readlink -f "$_d/device")
        printf 'nic %s %s' "${_d##*/}" "${_dev##*/}"
        for _i in "$_d/device/msi_irqs"/* "$_dev/../msi_irqs"/*; do
            [ -e "$_i" ] && printf ' %s' "${_i##*/}"
        done
        echo
    done
}

soak() {
    layout
    probe start
    cat /proc/interrupts > "$M/soak/interrupts.start" 2>> "$M/soak/errors"
    times > "$W/cost.before"
    cpu_start
    _soak0=$(uptime_cs)
    _sk=0
    _sdue=0
    _staken=0
    while :; do
        _sn=$(printf '%05d' "$_sk")
        sample "$_sn"
        _staken=$((_staken + 1))
        # the walk after every 5th sample too (as the local soak), named by the sample it follows
        [ $((_staken % 5)) -eq 1 ] && [ "$_staken" -gt 1 ] && probe "walk.$_sn"
        [ "$_sdue" -lt "$SOAK_CS" ] || break
        _snow=$(uptime_cs)
        _sk=$((_sk + 1))
        _sslot=$(((_snow - _soak0) / EVERY_CS + 1))
        [ "$_sslot" -gt "$_sk" ] && _sk=$_sslot
        _sdue=$((_sk * EVERY_CS))
        [ "$_sdue" -gt "$SOAK_CS" ] && _sdue=$SOAK_CS
        _swait=$((_soak0 + _sdue - $(uptime_cs)))
        [ "$_swait" -gt 0 ] && sleep "$((_swait / 100)).$(printf '%02d' $((_swait % 100)))"
    done
    cpu_stop
    times > "$W/cost.after"
    {
        echo "times-before $(tr '\n' ' ' < "$W/cost.before")"
        echo "times-after $(tr '\n' ' ' < "$W/cost.after")"
        [ -f "$W/cpu.times" ] && echo "reader-times $(tr '\n' ' ' < "$W/cpu.times")"
    } > "$M/soak/cost"
    cat /proc/interrupts > "$M/soak/interrupts.end" 2>> "$M/soak/errors"
    nics > "$M/soak/nics" 2>> "$M/soak/errors"
    probe end
}

# -- the run -------------------------------------------------------------------------------------

note "imagelint-bundle 1"
note "started $(date +%s.%N)"
while IFS= read -r line; do
    op=${line%% *}
    arg=${line#"$op"}
    arg=${arg# }
    case $op in
        root) ROOT=${arg%/}; case $ROOT in /* | '') ;; *) ROOT=$PWD/$ROOT ;; esac ;;
        limit)
            case ${arg%% *} in
                file) FILE_CAP=${arg#* } ;;
                journal) JOURNAL_CAP=${arg#* } ;;
                total) TOTAL_CAP=${arg#* } ;;
                entries) ENTRY_CAP=${arg#* } ;;
            esac
            ;;
        show) SHOW=$arg ;;
        soak) SOAK_CS=${arg%% *}; EVERY_CS=${arg#* } ;;
        version) note "collector $arg" ;;
    esac
done < "$W/plan.txt"
note "root ${ROOT:-/}"
note "limit file $FILE_CAP"
note "limit journal $JOURNAL_CAP"
note "limit total $TOTAL_CAP"
note "limit entries $ENTRY_CAP"
[ "$SOAK_CS" -gt 0 ] && note "soak $SOAK_CS $EVERY_CS"
phase start

[ "$SHOW" = 1 ] && show start && phase show
if [ "$SOAK_CS" -gt 0 ]; then
    soak
    [ "$SHOW" = 1 ] && show end
    phase soak
fi

# files are collected after the soak: the journal then covers its window
UNITS=0
while IFS= read -r line; do
    op=${line%% *}
    arg=${line#"$op"}
    arg=${arg# }
    case $op in
        C | M | T | R | J) want "$op" "$arg" ;;
        S) want C "$arg"; sshd_includes "$arg" ;;
        U) UNITS=1 ;;
        N) note "asked N $arg" ;;
    esac
done < "$W/plan.txt"
phase paths
[ "$UNITS" = 1 ] && unit_refs
chain / "$W/want.m"
phase references

# classify LIST CONTENT CAP: directories and links go to the tar; regular files with their content
# while under the caps (CONTENT=1), else described in the manifest; special files described only.
classify() {
    _cont=$2
    _cap=$3
    [ -s "$1" ] || return 0
    _old=$IFS
    IFS=$NL
    set -f
    set -- $(cat "$1")  # the list in memory: `read` would take a system call a byte
    while [ "$#" -gt 0 ]; do
        if [ "$#" -ge 512 ]; then _k=512; _a=$ARGS512; else _k=$#; args "$_k"; _a=$A; fi
        # one stat for 512 paths; should they be too long for one command line, one at a time
        _out=$(eval "stat -c '%f %u %g %s %n|' -- $_a" 2> /dev/null)
        if [ "$?" -gt 1 ]; then
            _out=
            _i=0
            for _p; do
                [ "$_i" -lt "$_k" ] || break
                _i=$((_i + 1))
                _out=$_out$NL$(stat -c '%f %u %g %s %n|' -- "$ROOT$_p" 2> /dev/null)
            done
        fi
        classify_lines
        shift "$_k"
    done
    set +f
    IFS=$_old
}
# args N: A is "$ROOT${1}" ... "$ROOT${N}", for eval
args() {
    A=
    _i=1
    while [ "$_i" -le "$1" ]; do
        A="$A \"\$ROOT\${$_i}\""
        _i=$((_i + 1))
    done
}
args 512
ARGS512=$A
classify_lines() {  # the lines of stat in _out (IFS is a newline, globbing off)
    for _l in $_out; do
        _m=${_l%% *}
        _r=${_l#* }
        _u=${_r%% *}
        _r=${_r#* }
        _g=${_r%% *}
        _r=${_r#* }
        _s=${_r%% *}
        _p=${_r#* }
        _p=${_p%|}
        _p=${_p#"$ROOT"}
        [ -n "$_p" ] || _p=/
        _t=$((0x$_m & 0170000))
        if [ "$_t" -eq 16384 ] || [ "$_t" -eq 40960 ]; then
            printf '.%s\n' "$_p" >&5
        elif [ "$_t" -eq 32768 ]; then
            if [ "$_cont" = 0 ]; then
                note "stat $_m $_u $_g $_s metadata $_p"
            elif [ "$_s" -gt "$_cap" ]; then
                note "stat $_m $_u $_g $_s over-file-limit $_p"
            elif [ $((TOTAL + _s)) -gt "$TOTAL_CAP" ]; then
                note "stat $_m $_u $_g $_s over-total-limit $_p"
            elif [ ! -r "$ROOT$_p" ]; then
                note "stat $_m $_u $_g $_s unreadable $_p"
            else
                TOTAL=$((TOTAL + _s))
                printf '.%s\n' "$_p" >&5
            fi
        else
            note "stat $_m $_u $_g $_s special $_p"
        fi
    done
}
sort -u "$W/want.c" > "$W/c.s"
sort -u "$W/want.j" > "$W/j.s"
sort -u "$W/c.s" "$W/j.s" > "$W/cj.s"
sort -u "$W/want.m" | comm -23 - "$W/cj.s" > "$W/m.s"
classify "$W/c.s" 1 "$FILE_CAP"
classify "$W/j.s" 1 "$JOURNAL_CAP"
classify "$W/m.s" 0 0
phase classify
[ "$BADNAMES" -gt 0 ] && note "unrepresentable-names $BADNAMES"
note "content-bytes $TOTAL"
# what the tar holds, kept in the bundle too: a member renamed on the way (damage) is caught at home
sort -u "$W/tar.lst" > "$M/members.txt"
tar -cf "$W/bundle.tar" -C "${ROOT:-/}" --no-recursion --no-unquote -T "$M/members.txt" 2> "$W/tar.err"
rc=$?
note "tar $rc"
phase tar
if [ "$rc" -gt 1 ]; then
    cat "$W/tar.err" >&2
    exit 94
fi
note "ended $(date +%s.%N)"
tar -rf "$W/bundle.tar" -C "$B" imagelint || exit 94
if command -v gzip > /dev/null 2>&1; then
    gzip -f -6 "$W/bundle.tar" || exit 94
    echo "$W/bundle.tar.gz"
else
    echo "$W/bundle.tar"
fi
