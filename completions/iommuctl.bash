# bash completion for iommuctl(1)                          -*- shell-script -*-
# Subcommands, their options, option values, files, and the devices iommuctl accepts, read from
# the host's sysfs (or DIR/sys with --root DIR). Needs bash-completion (_init_completion).
# The subcommands and options must be those of `iommuctl --help` and `iommuctl SUB --help`:
# tests/completion/completion.sh checks it.

# The devices `iommuctl explain` and --device accept (app::findDevice): PCI addresses, network
# interfaces and NVMe controllers and namespaces of PCI devices, as sysfs under root $1 shows them.
# $2: the word being completed; domain-0000 addresses are also offered short ("3d:00.0") once it
# looks like one.
_iommuctl_devices()
{
    local root=${1%/} cur=$2 path name target
    local pci='/[[:xdigit:]]{4}:[[:xdigit:]]{2}:[[:xdigit:]]{2}\.[0-7](/|$)'
    local -a devices=()
    for path in "$root"/sys/bus/pci/devices/*; do
        [[ -e $path || -L $path ]] || continue
        name=${path##*/}
        devices+=("$name")
        if [[ $cur =~ ^[[:xdigit:]]{2}: && $name == 0000:* ]]; then
            devices+=("${name#0000:}")
        fi
    done
    # A netdev or controller counts when its sysfs link leads through a PCI function (not a
    # virtual device, not a USB NIC's own node: those resolve to no device or to the controller).
    for path in "$root"/sys/class/net/* "$root"/sys/class/nvme/*; do
        [[ -L $path ]] || continue
        target=$(readlink -- "$path") || continue
        [[ $target == */virtual/* ]] && continue
        [[ $target =~ $pci ]] && devices+=("${path##*/}")
    done
    # NVMe namespaces (nvme0n1), not their partitions nor the hidden paths of multipath (nvme0c0n1).
    for path in "$root"/sys/class/block/nvme*; do
        name=${path##*/}
        [[ -L $path && $name =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
        target=$(readlink -- "$path") || continue
        [[ $target == */nvme/* || $target == */nvme-subsystem/* ]] && devices+=("$name")
    done
    mapfile -t COMPREPLY < <(compgen -W "${devices[*]}" -- "$cur")
    # Readline splits words at ':': what it inserts is the part after the last colon typed.
    __ltrim_colon_completions "$cur"
}

_iommuctl()
{
    local cur prev words cword split
    # -n :  keeps PCI addresses one word; -s splits --opt=value.
    _init_completion -s -n : || return

    local commands="status snapshot check plan explain apply revert top verify"
    local root=/ command='' at=0 i
    # --root goes before or after the subcommand; its value is where devices are read. $at: where
    # the subcommand is.
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --root)
                ((i + 1 < cword)) && root=${words[i + 1]}
                ((i++))
                ;;
            --root=*) root=${words[i]#--root=} ;;
            -*) ;;
            *)
                if [[ -z $command ]]; then
                    command=${words[i]}
                    at=$i
                fi
                ;;
        esac
    done
    # A tilde typed on the line is not expanded in COMP_WORDS.
    # shellcheck disable=SC2088
    [[ $root == '~/'* ]] && root=$HOME/${root#\~/}

    if [[ -z $command ]]; then
        case $prev in
            --root)
                _filedir -d
                return
                ;;
        esac
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W '--help --version --root' -- "$cur")
            [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
        else
            mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
        fi
        return
    fi

    local opts=''
    case $command in
        status) opts='--help --format --json --color --brief --measure --device --policies --root' ;;
        snapshot) opts='--help --no-redact --root' ;;
        check) opts='--help --strict --root' ;;
        plan) opts='--help --device --json --hotplug --boot --color --policies --root' ;;
        explain) opts='--help --json --hotplug --boot --color --policies --measure --root' ;;
        apply) opts='--help --device --hotplug --policies --measure --simulate --root' ;;
        revert) opts='--help --device --from' ;;
        top) opts='--help --seconds --once --json --device --all --sort --color' ;;
        verify) opts='--help --json --color --root' ;;
        *) return ;;
    esac

    case $prev in
        --root)
            _filedir -d
            return
            ;;
        --format)
            [[ $command == status ]] && mapfile -t COMPREPLY < <(compgen -W 'text json prometheus nfd' -- "$cur")
            return
            ;;
        --color)
            mapfile -t COMPREPLY < <(compgen -W 'auto always never' -- "$cur")
            return
            ;;
        --policies)
            _filedir -d
            return
            ;;
        --from)
            _filedir
            return
            ;;
        --sort)
            [[ $command == top ]] && mapfile -t COMPREPLY < <(compgen -W 'maps mib mean-size bounces faults device' -- "$cur")
            return
            ;;
        --seconds)
            return
            ;;
        --device)
            _iommuctl_devices "$root" "$cur"
            return
            ;;
    esac
    $split && return

    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
        return
    fi
    case $command in
        snapshot) _filedir ;;
        check) _filedir ;;
        explain | status)
            # One DEVICE: offer devices until one is given.
            local args=0
            for ((i = at + 1; i < cword; i++)); do
                case ${words[i]} in
                    --color | --policies | --format | --measure | --root) ((i++)) ;;
                    --device) ((i++, args++)) ;;
                    -*) ;;
                    *) ((args++)) ;;
                esac
            done
            ((args == 0)) && _iommuctl_devices "$root" "$cur"
            ;;
    esac
} &&
    complete -F _iommuctl iommuctl
